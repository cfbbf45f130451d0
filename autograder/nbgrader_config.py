# nbgrader configuration for KernelLab. Run nbgrader from this folder (autograder/):
# source = ../solutions, release = ../notebooks; see kernellab/grading/instructor/nbgrader_plugin.py.
# The course's preprocessors are named by import path, not imported here: importing kernellab imports torch, and
# generate_assignment, feedback, export and zip_collect need neither (1.6 s of each command's start).
import os
import sys

here = os.path.dirname(os.path.realpath(__file__))
root = os.path.dirname(here)
sys.path.insert(0, here)  # import kernellab from this checkout even when it is not installed
plugin = "kernellab.grading.instructor.nbgrader_plugin"

c = get_config()  # noqa: F821 - provided by traitlets
c.CourseDirectory.root = root
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = "autograder/submitted"
c.CourseDirectory.autograded_directory = "autograder/autograded"
c.CourseDirectory.feedback_directory = "autograder/feedback"
c.CourseDirectory.db_url = f"sqlite:///{os.path.join(here, 'gradebook.db')}"
c.CourseDirectory.course_id = "kernellab"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".*"]
# LMS downloads go to autograder/downloaded/<lesson>/archive/, named <student>_<lesson>.ipynb
# (set FileNameCollectorPlugin.named_regexp for your LMS's own naming).
c.ZipCollectApp.downloaded_directory = "autograder/downloaded"
c.ZipCollectApp.archive_directory = "archive"
c.ZipCollectApp.extracted_directory = "extracted"
# nbgrader matches this against the whole path of each extracted file
c.FileNameCollectorPlugin.named_regexp = r".*/(?P<student_id>[^_/]+)_(?P<file_id>[^/]+\.ipynb)$"
c.OverwriteCells.add_missing_cells = True
c.ClearSolutions.code_stub = {"python": 'raise NotImplementedError("write your code here")'}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
# nbgrader's own sanitizing steps, after one that gives every cell this nbgrader's schema version: another one in a
# single submission stopped the whole autograde run (grading/instructor/nbgrader_plugin.py, OneSchemaVersion); and before
# OverwriteCells restores the locked cells, the learner's markdown made inert HTML (InertMarkdown): the formgrader
# renders it unsanitized in the instructor's session.
c.Autograde.sanitize_preprocessors = [
    f"{plugin}.OneSchemaVersion", "nbgrader.preprocessors.ClearOutput", "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec", f"{plugin}.InertMarkdown", "nbgrader.preprocessors.OverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata"]
# LeaveUnrun runs no learner code in nbgrader's process tree (no notebook kernel); GradeOfRecord grades each
# problem in its own processes; AwaitingGpu marks the problems this machine could not grade (speed without a GPU)
# as needing a manual grade, after SaveAutoGrades wrote their 0.
c.Autograde.autograde_preprocessors = [
    f"{plugin}.LeaveUnrun", f"{plugin}.GradeOfRecord", "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor", "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades", f"{plugin}.AwaitingGpu", "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata"]
c.GradeOfRecord.course_root = here
c.GradeOfRecord.logs_dir = os.path.join(here, "grading_logs")
c.GenerateAssignment.create_assignment = True
c.Autograde.create_student = True

# Feedback (generate_feedback, `kernellab term feedback`): the grade-of-record paragraph under each test cell wraps
# at the page's edge (a stream output is a <pre>, cut off at the right otherwise), and the bare score each test cell
# carries for nbgrader (an `Out[ ]: 1` under the paragraph that already says "1 / 1") is left out of the page. Defined
# here, not in kernellab, for the reason above: importing kernellab imports torch.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor, Preprocessor  # noqa: E402
from nbgrader.preprocessors import GetGrades  # noqa: E402
from traitlets import Bool  # noqa: E402

FEEDBACK_CSS = ".output_area pre, .output_subarea pre, div.output_text pre {white-space: pre-wrap; " \
               "overflow-wrap: anywhere;}"


class TidyFeedback(Preprocessor):
    enabled = Bool(True)  # nbconvert's preprocessors are off unless enabled; nbgrader registers them as they are

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if cell.cell_type == "code" and (cell.metadata.get("nbgrader") or {}).get("grade"):
                cell.outputs = [o for o in cell.outputs if o.get("output_type") != "execute_result"]
        resources.setdefault("inlining", {}).setdefault("css", []).append(FEEDBACK_CSS)
        return nb, resources


c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor, TidyFeedback]
