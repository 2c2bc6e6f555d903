"""The book's pages as a reader on a rented B200 follows them (issue 42), checked on their Markdown
sources and on the package functions their cells call, without building the book: the intro's
first screen says what runs where (from the records), setup's B200 path comes in the safe order,
the course's address comes from one setting, and every command a page suggests runs here or is
marked GPU-only and answers ``--help``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from synthetic import bench_record

from gemm_course.measure import b200, b200_status, stepwise
from gemm_course.runtime import ladder

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def _page(name: str) -> str:
    return (BOOK / f"{name}.md").read_text()


def _code_cells(text: str) -> list:
    return re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, re.S)


def _b200(step, date="2027-01-02T00:00:00+00:00"):
    return dict(bench_record(step, 1000.0, 1500.0, date, gpu="NVIDIA B200"), _file="results/nvidia-b200/x_ladder.json")


def _h200(step):
    return dict(bench_record(step, 700.0, 750.0, "2026-12-01T00:00:00+00:00", gpu="NVIDIA H200"), _file="results/h.json")


def _publish_kit_run(results: Path, rows: list, stamp="20270102T0000"):
    """A kit run's stepwise log as the kit publishes it: results/logs/<stamp>_b200_stepwise.log."""
    logs = results / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    lines = []
    for row in rows:  # as stepwise.run_step prints them while the run goes on
        for phase in stepwise.PHASES:
            lines.append(f"{row['step']} {phase}: {row[phase]} (8 s)")
            if row[phase] != "ok":
                lines.append(f"  {row['step']} {row['failed']}")
                break
    text = "\n".join(lines) + "\n\n" + stepwise.table(rows) + "\n"
    (logs / f"{stamp}_b200_stepwise.log").write_text(text)


def _row(step, failed=""):
    phases = {"debug": "ok", "timed": "ok", "sanitizer": "ok"}
    if failed:
        phases[failed.split(":")[0]] = "FAILED"
    return {"step": step, **phases, "failed": failed, "seconds": 1.0, "passed": not failed}


# ---- the first screen: what runs where, from the records ----


def test_the_intro_opens_with_the_status_box():
    """The first code cell of the intro, before any section, shows b200.first_screen(): the box."""
    text = _page("intro")
    body = text.split("\n# ", 1)[1]
    first_section = body.index("\n## ")
    cell = body.index("```{code-cell}")
    assert cell < first_section and "first_screen()" in _code_cells(body)[0]
    assert len(body[:cell].split()) < 120, "the box must come within the intro's first screen"
    assert "remove-input" in body[cell:cell + 80]


def test_the_box_says_nothing_ran_on_a_b200_without_a_record(tmp_path):
    box = b200.first_screen([_h200("sm90/11")], results_dir=str(tmp_path))
    assert box.startswith(":::{admonition}") and box.rstrip().endswith(":::")
    assert "none has run on a B200 yet" in box and "compiled and checked on the CPU" in box
    assert "NVIDIA H200" in box and "[Setup](setup.md)" in box


def test_the_box_changes_by_itself_when_a_b200_record_lands(tmp_path):
    records = [_h200("sm90/11"), _b200("sm100/2"), _b200("sm100/3")]
    box = b200.first_screen(records, results_dir=str(tmp_path))
    assert "none has run" not in box
    assert "steps 2, 3 measured on a B200 (records of 2027-01-02)" in box
    last = max(s.number for s in ladder.steps("sm100"))
    assert f"steps 1, 4-{last} compiled and checked on the CPU, not yet run" in box
    assert b200.has_b200_record(records=records) and b200.has_b200_record("sm100/2", records)
    assert not b200.has_b200_record("sm100/11", records)
    assert not b200.has_b200_record(records=[_h200("sm90/2"), dict(_b200("sm100/2"), gpu="Synthetic GPU")])


def test_a_step_the_kit_failed_is_marked_failed_with_its_log(tmp_path):
    _publish_kit_run(tmp_path, [_row("sm100/1"), _row("sm100/7", "debug: watchdog: acc_pipeline.consumer_wait (3 warp reports)"),
                                _row("sm100/11", "timed: wrong result: sm100/11 1000x1000x4000 FAIL")])
    status = b200.step_status([_b200("sm100/1"), _b200("sm100/11")], results_dir=str(tmp_path))
    assert status["sm100/1"][0] == "measured" and status["sm100/2"] == ("compiled", "")
    state, detail = status["sm100/7"]
    assert state == "failed" and "watchdog: acc_pipeline.consumer_wait" in detail
    assert "results/logs/20270102T0000_b200_step_sm100-7_debug.log" in detail
    assert status["sm100/11"][0] == "failed" and "_b200_step_sm100-11_timed.log" in status["sm100/11"][1]
    box = b200.first_screen([_b200("sm100/1")], results_dir=str(tmp_path))
    assert "steps 7, 11 failed in the B200 kit" in box and "step 1 measured on a B200" in box


def test_the_newest_kit_run_decides(tmp_path):
    _publish_kit_run(tmp_path, [_row("sm100/7", "debug: hung: no exit within 600 s")], stamp="20270101T0000")
    _publish_kit_run(tmp_path, [_row("sm100/7")], stamp="20270102T0000")
    assert b200.step_status([], results_dir=str(tmp_path))["sm100/7"] == ("compiled", "")


# ---- the course's address: one setting ----


def _config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def test_the_address_is_one_setting_and_the_button_follows_it():
    config = _config()
    url = (config.get("repository") or {}).get("url", None)
    assert url is not None, "_config.yml must have repository.url (empty while the course is not published)"
    assert b200.repository_url() == url.strip()
    assert bool(config["html"].get("use_repository_button")) == bool(url.strip()), \
        "html.use_repository_button must be on exactly when repository.url is set (Jupyter Book refuses it without)"
    if url.strip():
        assert url.startswith("https://"), url


def test_no_page_has_a_placeholder_address():
    for page in sorted(BOOK.glob("*.md")):
        text = page.read_text()
        assert not re.search(r"<this repository>|<repository[^>]*>|git clone <", text, re.I), page.name
    assert "git clone" not in _page("setup"), "the clone command comes from b200.get_the_code(), not the page's text"
    assert "b200.get_the_code()" in "".join(_code_cells(_page("setup")))


def test_get_the_code_with_and_without_an_address():
    published = b200.get_the_code("https://example.org/gemm-course.git")
    assert "git clone https://example.org/gemm-course.git gemm-course" in published and "make setup" in published
    unpublished = b200.get_the_code("")
    assert "not published" in unpublished and "repository.url" in unpublished and "git clone gemm-course.bundle" in unpublished
    assert "make setup" in unpublished and "<" not in unpublished.split("```")[1]


def test_the_repository_url_is_read_without_pyyaml_too(tmp_path, monkeypatch):
    import sys

    path = tmp_path / "_config.yml"
    path.write_text('title: t\nrepository:\n  url: "https://example.org/c.git"  # the address\n  branch: main\nhtml:\n  x: 1\n')
    assert b200.repository_url(str(path)) == "https://example.org/c.git"
    monkeypatch.setitem(sys.modules, "yaml", None)  # the kit's python without PyYAML
    assert b200.repository_url(str(path)) == "https://example.org/c.git"
    path.write_text('repository:\n  url: ""\n')
    assert b200.repository_url(str(path)) == ""


def test_the_kit_names_the_address_from_the_same_setting():
    kit = (ROOT / "scripts" / "b200_validate.sh").read_text()
    assert "gemm_course.measure.b200 repository" in kit and "render_records.sh" in kit
    assert not re.search(r"https?://", kit.split("# the course's address")[1])


# ---- setup's B200 path ----


def _section(text: str, label: str) -> str:
    start = text.index(f"({label})=")
    following = re.search(r"^\(setup-b200-kit\)=", text[start:], re.M)
    return text[start:start + following.start()] if following else text[start:]


def test_the_b200_path_comes_in_the_safe_order():
    """Get the code, the kit, then the chapters with the watchdog on, then render the records."""
    b200_path = _section(_page("setup"), "setup-b200")
    marks = ["{ref}`setup-get-the-code`", "make b200 OUT=", "b200.phase_table()", "GEMM_COURSE_WATCHDOG=1",
             "{ref}`setup-b200-render`", "{doc}`linear`"]
    where = [b200_path.find(m) for m in marks]
    assert -1 not in where, dict(zip(marks, where))
    assert where == sorted(where), dict(zip(marks, where))
    assert "b200.blackwell_status()" in b200_path  # the status from the records, not typed


def test_the_watchdog_variable_is_the_one_the_package_reads():
    from gemm_course.runtime import watchdog

    assert watchdog.ENV == "GEMM_COURSE_WATCHDOG" and watchdog.setting("1") == watchdog.DEFAULT_SECONDS


def test_no_hand_typed_durations_on_the_setup_page():
    text = _page("setup")
    assert not re.search(r"\b(hours?|minutes?)\b", re.sub(r"```\{code-cell\}.*?```", "", text, flags=re.S)), \
        "durations come from b200.phase_table() (the kit's limits and the H200 logs)"
    assert "b200.phase_table()" in text


def test_the_phases_are_the_kits_own(tmp_path):
    from gemm_course.measure.stepwise import LIMITS_S
    from gemm_course.runtime import ladder

    kit = (ROOT / "scripts" / "b200_validate.sh").read_text()
    limits = b200.phase_limits()
    named = re.findall(r"^\s*phase\s+\"?([\w$]+)", kit, re.M)
    assert list(limits) == list(dict.fromkeys(n.replace("$tool", t) for n in named
                                              for t in (["racecheck", "synccheck"] if "$tool" in n else [""])))
    plan = {r["phase"]: r for r in b200.phase_plan()}
    steps = b200.kit_steps()
    assert steps == [s.key for s in ladder.steps("sm100")]
    assert plan["stepwise"]["limit_s"] == min(limits["stepwise"], sum(LIMITS_S.values()) * len(steps))
    assert all(r["what"] for r in plan.values()), "every phase says what it does (b200.PHASE_WHAT)"
    table = b200.phase_table()
    assert table.count("\n| `") == len(plan) and f"{sum(r['limit_s'] for r in plan.values()) / 3600:.1f} h" in table
    # the Hopper twin's time is read from its log
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "20270101T0000_pytest_gpu.log").write_text("....\n22 passed, 1709 deselected in 84.59s (0:01:24)\n")
    (logs / "20270101T0001_broad_sweep.log").write_text("[1/2] sm90/11 ... (10 s)\n[2/2] sm90/11 ... (275 s)\n")
    (logs / "20270101T0002_stepwise_sm90.log").write_text("sm90/1 debug: ok (8 s)\nsm90/1 timed: ok (7 s)\n")
    twins = {r["phase"]: (r["hopper_s"], r["hopper_log"]) for r in b200.phase_plan(results_dir=str(tmp_path))}
    assert twins["pytest_gpu"] == (84.59, "results/logs/20270101T0000_pytest_gpu.log")
    assert twins["broad_sweep"][0] == 275 and twins["stepwise"][0] == 15 and twins["ladder"] == (None, None)


def test_remote_jupyter_in_two_lines():
    text = _page("setup")
    blocks = re.findall(r"^( *)```bash\n(.*?)^\1```", text, re.S | re.M)
    remote = [body for _, body in blocks if "ssh -N -L 8888:localhost:8888" in body]
    assert remote and all("--no-browser" in body and len(body.strip().splitlines()) == 2 for body in remote)
    assert any("GEMM_COURSE_WATCHDOG=1" in body for body in remote)


def test_command_blocks_fit_the_column():
    """No line of a shell block is cut off: each fits the page's column (76 characters)."""
    for page in sorted(BOOK.glob("*.md")):
        for _, body in re.findall(r"^( *)```(?:bash|sh|console)\n(.*?)^\1```", page.read_text(), re.S | re.M):
            for line in body.splitlines():
                assert len(line.rstrip()) <= 76, f"{page.name}: {line}"


# ---- NOTES.md in the book ----


def test_notes_is_a_page_made_of_the_file_itself():
    notes = _page("notes")
    assert re.search(r"```\{include\} \.\./NOTES\.md\n", notes)
    assert "book/notes" in (ROOT / "_toc.yml").read_text()
    for page in sorted(BOOK.glob("*.md")):
        if page.name == "notes.md":
            continue
        text = re.sub(r"\[NOTES\.md\]\(notes\.md\)", "", page.read_text())
        text = re.sub(r"```\{code-cell\}.*?```", "", text, flags=re.S)
        assert "NOTES.md" not in text, f"{page.name} cites NOTES.md without linking the page: [NOTES.md](notes.md)"


# ---- the drop-in page ----


def test_the_model_page_is_in_the_reference_part():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    reference = next(p for p in toc["parts"] if p["caption"] == "Reference")
    assert {"file": "book/linear"} in reference["chapters"]
    cells = "".join(_code_cells(_page("linear")))
    assert "chapter.setup()" in cells and "if GPU_ARCH is None:" in cells and "patch_linears" in cells
    assert "lin.validate(" in cells and "F.linear" in cells


# ---- every command a page suggests ----

_PREFIXES = (".venv/bin/gemm-course ", "gemm-course ", "make ", "bash scripts/", "scripts/", ".venv/bin/python -m gemm_course",
             "python -m gemm_course")
_GPU_WORDS = re.compile(r"\bGPU\b|B200|H100|H200|Hopper|Blackwell")
_PLACEHOLDERS = {"STEP": "sm100/2", "sm100/N": "sm100/2", "SHAPE": "4096", "OUT=...": "OUT=OUT"}


def _suggested(text: str) -> list:
    """(command, context) for every course command in a page: each line of a shell block (its context:
    the block and the paragraph before it) and each inline code span that starts like one (its
    paragraph). Cell outputs that show commands are added by the caller."""
    found = []
    for match in re.finditer(r"^( *)```(?:bash|sh)\n(.*?)^\1```", text, re.S | re.M):
        before = text[:match.start()].rstrip().rsplit("\n\n", 1)[-1]
        for line in match.group(2).splitlines():
            command = line.split(" #")[0].strip()
            if command.startswith(_PREFIXES):
                found.append((command, before + match.group(0)))
    prose = re.sub(r"^( *)```.*?^\1```", "", text, flags=re.S | re.M)
    for paragraph in prose.split("\n\n"):
        for span in re.findall(r"`([^`\n]+)`", paragraph):
            if span.startswith(_PREFIXES):
                found.append((span, paragraph))
    return found


def _all_suggested() -> list:
    out = []
    for page in sorted(BOOK.glob("*.md")):
        out += [(page.name, command, context) for command, context in _suggested(page.read_text())]
    for url in ("", "https://example.org/gemm-course.git"):  # the setup page's cell, either way
        out += [("setup.md (cell)", c, ctx) for c, ctx in _suggested(b200.get_the_code(url))]
    return out


def _words(command: str) -> list:
    import shlex

    for old, new in _PLACEHOLDERS.items():
        command = command.replace(old, new)
    return shlex.split(command)


def _cli_argv(command: str):
    words = _words(command)
    return words[1:] if words[0].endswith("gemm-course") else None


def _gpu_only(command: str) -> bool:
    from gemm_course import cli

    argv = _cli_argv(command)
    if argv is not None:
        sub = cli.build_parser()._subparsers._group_actions[0]
        return (sub.choices[argv[0]].description or "").startswith("GPU:") or \
            any(a.dest == argv[0] and a.help.startswith("GPU:") for a in sub._choices_actions)
    words = _words(command)
    if words[0] == "make":
        return any(w in ("b200", "test-gpu") for w in words[1:])
    script = next((w for w in words if w.startswith("scripts/")), "")
    return bool(re.match(r"scripts/(gpu_|b200_|ncu_)", script))


def test_the_pages_suggest_commands_and_every_one_is_checked():
    commands = {c for _, c, _ in _all_suggested()}
    for expected in ("make b200 OUT=$HOME/b200-run", "bash scripts/render_records.sh $HOME/b200-run",
                     ".venv/bin/gemm-course doctor", ".venv/bin/gemm-course bench sm90/11 --shapes 4096"):
        assert expected in commands, expected
    assert "gemm-course bench" not in commands, "a bench without a step fails: name one"


def test_gpu_only_commands_are_marked_and_parse(capsys):
    """A command that needs a GPU says so where the page suggests it, and its arguments parse: the
    CLI's own parser for gemm-course (and its --help), the Makefile's targets, the scripts' syntax."""
    from gemm_course import cli

    for page, command, context in _all_suggested():
        if not _gpu_only(command):
            continue
        assert _GPU_WORDS.search(context), f"{page}: `{command}` needs a GPU but its paragraph does not say so"
        argv = _cli_argv(command)
        if argv is not None:
            cli.build_parser().parse_args(argv)  # SystemExit on a bad argument
            from gemm_course.runtime import ladder

            for word in argv[1:]:
                if re.fullmatch(r"sm\d+/\d+", word):
                    ladder.get(word)
            with pytest.raises(SystemExit) as e:
                cli.main([argv[0], "--help"])
            assert e.value.code == 0
    capsys.readouterr()


def _make_targets() -> set:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([\w-]+):", text, re.M))


def test_every_make_target_and_script_a_page_names_exists():
    import subprocess

    targets = _make_targets()
    for page, command, _ in _all_suggested():
        words = _words(command)
        if words[0] == "make":
            named = [w for w in words[1:] if "=" not in w]
            assert named and all(t in targets for t in named), f"{page}: {command}"
        for script in (w for w in words if w.startswith("scripts/")):
            path = ROOT / script
            assert path.exists(), f"{page}: {command}"
            if path.suffix == ".sh":
                assert subprocess.run(["bash", "-n", str(path)]).returncode == 0, script
            else:
                compile(path.read_text(), str(path), "exec")


def test_the_cpu_commands_run(capsys, tmp_path):
    """Every gemm-course command a page suggests that needs no GPU, run with its arguments through the
    CLI's entry point (inspect, which compiles, in the compile-marked test below); the python -m
    modules answer --help; the render script, dry."""
    import os
    import subprocess

    from gemm_course import cli

    ran = set()
    for page, command, _ in _all_suggested():
        argv = _cli_argv(command)
        if argv is not None and not _gpu_only(command) and argv[0] != "inspect":
            assert cli.main(argv) in (0, None), f"{page}: {command}"
            ran.add(argv[0])
        words = _words(command)
        if "-m" in words:
            module = words[words.index("-m") + 1]
            mod = __import__(module, fromlist=["main"])
            assert callable(getattr(mod, "main", None)), f"{page}: {command}"
            if module.endswith(("stepwise", "b200")):
                try:
                    code = mod.main(["--help"])
                except SystemExit as e:
                    code = e.code
                assert code == 0, f"{page}: {command}"
        if "scripts/render_records.sh" in words:
            out = subprocess.run(["bash", *words[words.index("bash") + 1:]], capture_output=True, text=True,
                                 env=dict(os.environ, DRY_RUN="1", HOME=str(tmp_path)), timeout=60)
            assert out.returncode == 0 and "CUDA_VISIBLE_DEVICES= make book" in out.stdout, out.stdout + out.stderr
    assert {"doctor", "diff"} <= ran
    capsys.readouterr()



def test_the_hopper_line_names_steps_without_a_record():
    from gemm_course.runtime import ladder

    keys = [s.key for s in ladder.steps("sm90")]
    every = b200.hopper_status([_h200(k) for k in keys])
    assert every.startswith("every step run") and "NVIDIA H200" in every and "not yet" not in every
    some = b200.hopper_status([_h200(k) for k in keys[:3]])
    assert some.startswith("steps 1-3 run")
    assert f"{b200_status._steps_text(keys[3:])} compiled and checked on the CPU, not yet measured" in some


@pytest.mark.fast
def test_every_label_is_defined_once_and_every_ref_has_one():
    """What the book build refuses (a duplicate target, an undefined label), found in the sources:
    every ``(label)=`` in the chapters and book pages once, every ``{ref}`...``` naming one of them."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    texts = {p: p.read_text() for p in sorted((root / "notebooks").glob("*.md")) + sorted((root / "book").glob("*.md"))}
    labels = [m for t in texts.values() for m in re.findall(r"^\(([\w-]+)\)=\s*$", t, re.M)]
    assert len(labels) == len(set(labels)), sorted({x for x in labels if labels.count(x) > 1})
    refs = {m for t in texts.values() for m in re.findall(r"\{ref\}`(?:[^`<]*<)?([\w-]+)>?`", t)}
    assert refs <= set(labels), sorted(refs - set(labels))
