"""Each Hydra CLI's ``--help`` shows its own usage and only the config groups it composes; refused command
lines (an old key, a missing ``out=``, no data) give one line and leave nothing behind."""

import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
CONFIGS = Path(__file__).resolve().parents[1] / "configs"
# the groups each CLI composes (configs/<tool>.yaml's defaults; hydra_settings is internal)
GROUPS = {
    "vla-train": ["policy", "algo", "data", "env", "experiment"],
    "vla-eval": ["safety"],
    "vla-rollout": ["safety"],
    "vla-collect": [],
    "vla-replay": [],
    "vla-bag2dataset": [],
}
ALL_GROUPS = sorted(p.name for p in CONFIGS.iterdir() if p.is_dir() and p.name != "hydra_settings")


def _run_all(commands: dict[str, tuple[list[str], Path | None]]) -> dict[str, subprocess.CompletedProcess]:
    """Run the commands side by side (each CLI start imports torch and MuJoCo: seconds)."""
    procs = {
        k: subprocess.Popen(
            [str(BIN / cmd[0]), *cmd[1:]], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for k, (cmd, cwd) in commands.items()
    }
    out = {}
    for k, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        out[k] = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    return out


def _options(group: str) -> str:
    return ", ".join(sorted(p.stem for p in (CONFIGS / group).glob("*.yaml")))


def test_the_group_lists_match_the_tools_defaults():
    import yaml

    for tool, groups in GROUPS.items():
        defaults = yaml.safe_load((CONFIGS / f"{tool.removeprefix('vla-')}.yaml").read_text())["defaults"]
        composed = [next(iter(d)) for d in defaults if isinstance(d, dict)]
        composed = [g for g in composed if g in ALL_GROUPS]
        assert sorted(composed) == sorted(groups), tool


def test_help_lists_only_the_tools_own_groups():
    results = _run_all({tool: ([tool, "--help"], None) for tool in GROUPS})
    for tool, res in results.items():
        text = res.stdout
        assert res.returncode == 0, res.stderr
        assert text.startswith(f"usage: {tool} "), text[:200]
        for group in GROUPS[tool]:
            assert f"\n{group}: {_options(group)}\n" in text, (tool, group)
        for other in set(ALL_GROUPS) - set(GROUPS[tool]):
            assert f"\n{other}: {_options(other)}" not in text and f"{other}=" not in text, (tool, other)
        assert "== Config" in text and "Powered by Hydra" not in text
    assert "algo" not in results["vla-collect"].stdout


def test_refusals_are_one_line_and_leave_nothing(tmp_path):
    cases = {
        "old_deploy_horizon": (["vla-eval", "checkpoint=x", "deploy.executor.horizon=3"], "deploy.horizon="),
        "old_env_horizon": (["vla-train", "data.roots=[x]", "env.horizon=3"], "deploy.horizon="),
        "two_tasks": (["vla-eval", "checkpoint=x", "task=push", "env.task=stack"], "env.task=stack differs"),
        "rollout_without_out": (["vla-rollout", "checkpoint=x", "task=reach"], "out="),
        "train_without_data": (["vla-train"], "data.roots is empty"),
    }
    dirs = {k: tmp_path / k for k in cases}
    for d in dirs.values():
        d.mkdir()
    results = _run_all({k: (cmd, dirs[k]) for k, (cmd, _) in cases.items()})
    for k, res in results.items():
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1, (k, res.stdout + res.stderr)
        assert lines[0].startswith("error: ") and cases[k][1] in lines[0], (k, lines[0])
        assert not any(dirs[k].iterdir()), k  # no folder, no lock file


@pytest.mark.parametrize(
    ("override", "refused"),
    [("deploy.executor.horizon=3", True), ("+env.horizon=3", True), ("++env.horizon=3", True)]
    + [("deploy.horizon=3", False), ("env.task=reach", False)],
)
def test_refuse_renamed(override, refused):
    from vla.errors import InputError
    from vla.hydra_utils import refuse_renamed

    if refused:
        with pytest.raises(InputError, match=r"is now deploy\.horizon="):
            refuse_renamed([override])
    else:
        refuse_renamed([override])
