"""Where the course lives: one place for the repository and the ref that Colab installs from."""
REPO = "kernellab/kernellab"
REF = "main"
GIT_URL = f"git+https://github.com/{REPO}@{REF}"


def colab_url(lesson_id: str) -> str:
    return f"https://colab.research.google.com/github/{REPO}/blob/{REF}/notebooks/{lesson_id}/{lesson_id}.ipynb"
