"""The docs hold together: every relative link in the README, ARCHITECTURE.md and docs/*.md
points at a file (and a heading) that exists; the README stays a newcomer's page; the settings
reference is what the settings' declaration generates; and no page names a setting, or a
default, the declaration does not have."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpsearch.settings_help import SETTINGS, default_text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import settings_reference  # noqa: E402 - a tool, found on its own path

PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
README = (ROOT / "README.md").read_text()
# The README's two commands (the main job, the tests), whole, on one line each.
TWO_COMMANDS = re.findall(
    r"^python3 -m venv .*$", README.split("## The two commands")[1].split("\n#")[0], flags=re.M
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def without_code(text: str) -> str:
    """The text outside fenced blocks and inline code: what a reader sees as prose."""
    text = re.sub(r"^ *```.*?^ *```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces
    to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The page's headings' anchors (a repeated heading gets `-1`, `-2`, as on GitHub)."""
    text = re.sub(r"^ *```.*?^ *```", "", page.read_text(), flags=re.S | re.M)
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#+ (.*)$", text, flags=re.M):
        name = anchor(heading)
        found.add(f"{name}-{seen[name]}" if name in seen else name)
        seen[name] = seen.get(name, 0) + 1
    return found


def broken_links(page: Path) -> list[str]:
    """Each relative link of the page whose file, or whose heading, is not there."""
    broken = []
    for target in LINK.findall(without_code(page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto: ...
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked}")
        elif fragment and (linked.suffix != ".md" or fragment not in anchors(linked)):
            broken.append(f"{target}: no heading #{fragment} in {linked.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_points_at_a_file_and_heading_that_exist(page: Path) -> None:
    assert broken_links(page) == [], page


def test_a_broken_link_or_anchor_is_caught(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A page\n\n## Its `x` part\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#its-x-part) [ok](#b) `[code](gone.md)` [web](https://x.org/y)\n"
        "[gone](gone.md) [no heading](a.md#nothing)\n\n# B\n"
    )
    assert broken_links(page) == [
        f"gone.md: no file {tmp_path / 'gone.md'}",
        "a.md#nothing: no heading #nothing in a.md",
    ]


def test_the_readme_is_a_page_a_newcomer_reads() -> None:
    """At most about 200 lines, none over 100 characters but the two commands (which the
    README gives whole, as .ci/run runs them)."""
    lines = README.splitlines()
    assert len(lines) <= 200
    assert [ln for ln in lines if len(ln) > 100 and ln not in TWO_COMMANDS] == []


def test_the_two_commands_are_the_ones_ci_runs() -> None:
    """The main job (a real sweep on the bundled digits) and the tests, the latter exactly as
    .ci/run runs it."""
    main, tests = TWO_COMMANDS
    assert main.endswith("python -m hpsearch --multirun lr=1e-3,1e-2 batch=32,128 device=cpu")
    assert tests in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_hydra_14_pair_the_docs_give_is_the_one_ci_installs() -> None:
    """docs/search.md's command for hpsearch beside Hydra's sweeper on Hydra 1.4 names the
    pins .ci/run's second venv installs and tests (its Optuna within the docs' range)."""
    row = next(
        ln
        for ln in (ROOT / "docs" / "search.md").read_text().splitlines()
        if ln.startswith("| 1.4 |")
    )
    said = dict(re.findall(r"([\w-]+)==([\w.]+)", row))
    ci = re.search(r"^OTHER_LINE=\((.*)\)$", (ROOT / ".ci" / "run").read_text(), re.M)
    assert ci is not None
    pins = dict(pin.split("==") for pin in ci.group(1).split())
    assert said == {k: v for k, v in pins.items() if k != "optuna"} and len(said) == 3
    assert '"optuna>=4.9,<5"' in row and pins["optuna"].startswith("4.")


def test_the_settings_reference_is_what_the_declaration_generates() -> None:
    """docs/settings.md cannot drift: regenerated, it is the same, byte for byte."""
    page = ROOT / "docs" / "settings.md"
    assert page.read_text() == settings_reference.reference(), (
        "docs/settings.md differs from the settings' declaration: "
        "run .venv/bin/python tools/settings_reference.py"
    )


def test_the_reference_check_fails_on_a_stale_page(tmp_path: Path, monkeypatch) -> None:
    stale = tmp_path / "settings.md"
    stale.write_text(settings_reference.reference().replace("`true`", "`false`", 1))
    monkeypatch.setattr(settings_reference, "PAGE", stale)
    assert settings_reference.main(["--check"]) == 1
    stale.write_text(settings_reference.reference())
    assert settings_reference.main(["--check"]) == 0


def test_the_reference_tool_runs_as_the_docs_say() -> None:
    checked = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "settings_reference.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def declared() -> dict[str, dict[str, str]]:
    """{`launcher`/`sweeper`: {setting: its default as the reference writes it}}."""
    found: dict[str, dict[str, str]] = {}
    for which, key, *_ in settings_reference.SECTIONS:
        fields = settings_reference.settings(SETTINGS[which], key)
        found[which] = {name[len(key) + 1 :]: default_text(f) for name, f, _, _ in fields}
    return found


# Named on purpose though no setting: the typo a refusal's example shows.
NOT_SETTINGS = {"launcher": {"jobs_per_gpus"}, "sweeper": set()}


def named_settings(text: str) -> list[tuple[str, str]]:
    """(launcher/sweeper, setting) for each `hydra.launcher.X` / `hydra.sweeper.X` a page
    names; a nested key counts as its setting (`ray.address`) or its mapping (`pruner_args`)."""
    found = re.findall(r"hydra\.(launcher|sweeper)\.([a-z_]+(?:\.[a-z_]+)?)", text)
    return [(part, name) for part, name in found if name not in NOT_SETTINGS[part]]


def unknown_settings(text: str) -> list[str]:
    known = declared()
    unknown = []
    for part, name in named_settings(text):
        if name not in known[part] and name.split(".")[0] not in known[part]:
            unknown.append(f"hydra.{part}.{name}")
    return unknown


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_setting_a_page_names_is_declared(page: Path) -> None:
    assert unknown_settings(page.read_text()) == []


def test_a_setting_that_is_gone_is_caught() -> None:
    assert unknown_settings("`hydra.launcher.gpu_count=2` `hydra.launcher.ray.address=auto`") == [
        "hydra.launcher.gpu_count"
    ]


def wrong_defaults(text: str) -> list[str]:
    """Rows of a hand-written settings table (a `setting` and a `default` column) whose
    setting is not declared or whose default is not the declared one."""
    found = declared()
    known = {**found["sweeper"], **found["launcher"]}
    wrong = []
    for header, rows in re.findall(r"^(\|.*\|)\n\|[-| ]+\|\n((?:\|.*\|\n?)*)", text, flags=re.M):
        cells = [c.strip().lower() for c in header.strip("|").split("|")]
        if not (cells[0].startswith("setting") and "default" in cells):
            continue
        column = cells.index("default")
        for row in rows.splitlines():
            values = [c.strip() for c in row.strip("|").split("|")]
            name = re.sub(r"\[`?([^`\]]*)`?\]\(.*?\)|`", r"\1", values[0]).split(".", 2)[-1]
            default = values[column].strip("`")
            if known.get(name) != default:
                wrong.append(f"{name}: {default} (declared: {known.get(name)})")
    return wrong


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_settings_table_on_a_page_agrees_with_the_declaration(page: Path) -> None:
    assert wrong_defaults(page.read_text()) == []


def test_a_settings_table_with_a_wrong_default_is_caught() -> None:
    table = "| setting | default | meaning |\n|---|---|---|\n| `n_trials` | 20 | x |\n"
    assert wrong_defaults(table) == []
    assert wrong_defaults(table.replace("20", "30")) == ["n_trials: 30 (declared: 20)"]


def test_the_generated_reference_names_every_setting_once() -> None:
    """An entry per declared setting, the nested ones (`ray.*`) too; none twice, none else."""
    text = settings_reference.reference()
    expected = [f"hydra.{part}.{name}" for part, names in declared().items() for name in names]
    assert "hydra.launcher.ray.address" in expected and "hydra.sweeper.pruner" in expected
    assert re.findall(r"^### `(.*)`$", text, flags=re.M) == expected
