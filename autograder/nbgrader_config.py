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
# problem in its own processes.
c.Autograde.autograde_preprocessors = [
    f"{plugin}.LeaveUnrun", f"{plugin}.GradeOfRecord", "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor", "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades", "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata"]
c.GradeOfRecord.course_root = here
c.GradeOfRecord.logs_dir = os.path.join(here, "grading_logs")
c.GenerateAssignment.create_assignment = True
c.Autograde.create_student = True
