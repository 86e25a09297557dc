"""The agent teacher: brief a coding agent in iter_N/TEACHER.md and stop with exit code 3."""
from __future__ import annotations

from driver import resources
from driver.errors import WaitingForTeacher
from driver.gates import hparams, rules
from driver.run.files import atomic_write_text
from driver.teachers import OUTPUTS, SET_ASIDE, Brief, outputs_present
from driver.run.arm_files import ArmFiles


class AgentTeacher:
    name = "agent"

    def teach(self, brief: Brief) -> None:
        if outputs_present(brief.iter_dir):
            return
        text = resources.jinja().get_template("teacher_brief.md.j2").render(
            b=brief, outputs=OUTPUTS, hub=brief.hub, rules=rules, set_aside=SET_ASIDE,
            hparams_bounds=hparams.bounds_markdown(),
            prior=[str(p) for p in brief.prior_reports],
            prior_datasets=[str(p.parent / ArmFiles.DATASET) for p in brief.prior_reports
                            if (p.parent / ArmFiles.DATASET).exists()])
        path = brief.iter_dir / "TEACHER.md"
        atomic_write_text(path, text)
        raise WaitingForTeacher(path)
