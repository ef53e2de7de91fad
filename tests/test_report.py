"""`python -m hpsearch.report`: the leaderboard and plot of a sweep dir, from disk alone."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib.image
import pytest

from hpsearch.report import build_figure, load_sweep, main
from hydra_plugins.hpsearch_launcher.results import ResultsTable

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# lr x model, with one failed and one timed-out job; val_accuracy is the objective.
RUNS: list[tuple[str, str, str, str, str]] = [
    # lr, model, status, objective, error
    ("0.0001", "mlp", "completed", "0.71", ""),
    ("0.001", "mlp", "completed", "0.88", ""),
    ("0.01", "cnn", "completed", "0.95", ""),
    ("0.1", "cnn", "failed", "", "TrainingDiverged: loss is nan at epoch 2"),
    ("0.001", "cnn", "resumed", "0.91", ""),
    ("0.1", "mlp", "timeout", "", "no result within 600s"),
]


def make_sweep(
    sweep_dir: Path,
    runs: Sequence[tuple[str, str, str, str, str]] = RUNS,
    multirun: str | None = "objective:\n  metric: val_accuracy\n  mode: max\n",
) -> Path:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if multirun is not None:
        (sweep_dir / "multirun.yaml").write_text(multirun)
    table = ResultsTable(sweep_dir / "results.csv")
    for job, (lr, model, status, objective, error) in enumerate(runs):
        table.put(row(job, status, objective, error, sweep_dir), {"lr": lr, "model": model})
    return sweep_dir


def row(job: int, status: str, objective: str, error: str, sweep_dir: Path) -> dict[str, object]:
    return {
        "job": job,
        "status": status,
        "objective": objective,
        "val_accuracy": objective,
        "test_accuracy": objective,
        "wall_time_s": 12.5,
        "run_dir": str(sweep_dir / str(job)),
        "config_hash": f"hash{job}",
        "error": error,
    }


def ranked_objectives(stdout: str) -> list[str]:
    """The objective column of the leaderboard's rank lines, in printed order."""
    lines = [line.split() for line in stdout.splitlines()]
    return [cells[1] for cells in lines if cells and cells[0].isdigit()]


def assert_png(path: Path, min_width: int = 400) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    assert min_width <= width <= 3000 and 300 <= height <= 3000


def test_report_prints_best_first_and_the_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_dir = make_sweep(tmp_path / "sweep")

    assert main([str(sweep_dir)]) == 0

    out = capsys.readouterr().out
    assert ranked_objectives(out) == ["0.9500", "0.9100", "0.8800", "0.7100"]
    assert "TrainingDiverged: loss is nan at epoch 2" in out
    assert "no result within 600s" in out
    assert "FAILED" in out and "TIMEOUT" in out
    assert out.rstrip().splitlines()[-1] == f"plot: {sweep_dir / 'report.png'}"
    # Two panels side by side, 4.5 inches each at 120 dpi.
    assert_png(sweep_dir / "report.png", min_width=900)


def test_min_mode_ranks_the_lowest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_dir = make_sweep(
        tmp_path / "sweep", multirun="objective:\n  metric: val_loss\n  mode: min\n"
    )

    assert main([str(sweep_dir), "--top", "2"]) == 0

    assert ranked_objectives(capsys.readouterr().out) == ["0.7100", "0.8800"]


def test_without_multirun_yaml_higher_is_better(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_dir = make_sweep(tmp_path / "sweep", multirun=None)

    assert main([str(sweep_dir)]) == 0

    assert ranked_objectives(capsys.readouterr().out)[0] == "0.9500"
    assert load_sweep(sweep_dir).metric == "objective"


def test_plot_has_log_lr_categorical_model_best_and_failures(tmp_path: Path) -> None:
    fig = build_figure(load_sweep(make_sweep(tmp_path / "sweep")))
    lr, model = fig.axes

    assert lr.get_xscale() == "log"
    assert lr.get_ylabel() == "val_accuracy"
    assert [t.get_text() for t in model.get_xticklabels()] == ["cnn", "mlp"]
    legend = lr.get_legend()
    assert legend is not None
    assert {t.get_text() for t in legend.get_texts()} == {"runs", "failed", "best"}
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "best 0.95" in texts
    assert "\N{MULTIPLICATION SIGN}2" in texts  # both failures sit at lr=0.1
    assert fig.get_suptitle() == "sweep: 6 runs, best val_accuracy=0.95"


def test_sweep_without_params_plots_by_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_dir = tmp_path / "single"
    sweep_dir.mkdir()
    table = ResultsTable(sweep_dir / "results.csv")
    for job in range(3):
        table.put(row(job, "completed", f"0.{job + 5}", "", sweep_dir), {})
    plot = tmp_path / "elsewhere" / "single.png"

    assert main([str(sweep_dir), "--plot", str(plot)]) == 0

    assert capsys.readouterr().out.rstrip().endswith(f"plot: {plot}")
    assert_png(plot)
    assert [ax.get_xlabel() for ax in build_figure(load_sweep(sweep_dir)).axes] == ["job"]


def error_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_missing_dir_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-sweep"
    assert f"sweep dir {missing} does not exist" in error_of([str(missing)], capsys)


def test_dir_without_results_csv_says_run_a_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = error_of([str(tmp_path)], capsys)
    assert f"no results.csv in {tmp_path}: run a sweep with the hpsearch launcher" in err
    assert not (tmp_path / "report.png").exists()


def test_empty_results_csv_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "results.csv").write_text("job,lr,status,objective,run_dir,config_hash,error\n")
    assert f"{tmp_path / 'results.csv'} has no rows" in error_of([str(tmp_path)], capsys)


def test_bad_multirun_yaml_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep_dir = make_sweep(tmp_path / "sweep", multirun="objective: [unclosed\n")
    assert f"cannot read {sweep_dir / 'multirun.yaml'}" in error_of([str(sweep_dir)], capsys)


def test_runs_as_a_module(tmp_path: Path) -> None:
    sweep_dir = make_sweep(tmp_path / "sweep")

    done = subprocess.run(
        [sys.executable, "-m", "hpsearch.report", str(sweep_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert ranked_objectives(done.stdout)[0] == "0.9500"
    assert_png(sweep_dir / "report.png")
