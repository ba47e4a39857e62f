"""node-problem-detector's plugin answer (npd.py) and `fleetcheck node`'s own inputs, on
results files made here: exit 0/1/other and one line of at most 80 characters."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

import pytest

from fleetcheck.node_agent import duration
from fleetcheck.node_chroot import Database
from fleetcheck.npd import MAX_LINE, OK, PROBLEM, UNKNOWN, verdict
from fleetcheck.report.metrics import finished_timestamp
from fleetcheck.results import HostError, dump_json
from results_factory import make_run

pytestmark = pytest.mark.unit


def written(tmp_path, run) -> str:
    path = str(tmp_path / "node.json")
    dump_json(run, path)
    return path


def test_a_failing_check_is_a_problem_in_one_short_line(tmp_path):
    run = make_run(10, hostile=False)
    long = replace(run.hosts[4], name="node-with-a-rather-long-name/" + "p" * 60)
    path = written(tmp_path, replace(run, hosts=[long] + list(run.hosts[5:7]),
                                     complete=True))
    now = finished_timestamp(run) + 10
    code, line = verdict(path, 900, now)
    assert code == PROBLEM and line.startswith("fleetcheck: FAIL dflash-layer-offset on ")
    assert len(line) == MAX_LINE and line.endswith("...")


def test_passing_and_warning_installs_are_ok(tmp_path):
    run = make_run(3, hostile=False)
    hosts = [run.hosts[0], replace(run.hosts[1], status="warn")]
    path = written(tmp_path, replace(run, hosts=hosts, complete=True))
    code, line = verdict(path, 900, finished_timestamp(run) + 1)
    assert (code, line) == (OK, "fleetcheck: ok: every check passes on 2 installs "
                                "(1 with warnings)")
    empty = written(tmp_path, replace(run, hosts=[], complete=True))
    assert verdict(empty, 900, finished_timestamp(run))[0] == OK


def test_stale_errored_or_missing_rounds_are_unknown(tmp_path):
    run = replace(make_run(3, hostile=False), complete=True)
    path = written(tmp_path, run)
    code, line = verdict(path, 900, finished_timestamp(run) + 901)
    assert code == UNKNOWN and line == "fleetcheck: unknown: last round 901s old"
    errored = replace(run.hosts[0], status="error", error=HostError("timeout", "slow"),
                      checks=[])
    path = written(tmp_path, replace(run, hosts=[errored]))
    code, line = verdict(path, 900, finished_timestamp(run))
    assert code == UNKNOWN and "not judged" in line
    (tmp_path / "junk.json").write_text("{}")
    assert verdict(str(tmp_path / "junk.json"), 900)[0] == UNKNOWN
    assert verdict(str(tmp_path / "nothing.json"), 900)[0] == UNKNOWN


def test_durations():
    assert duration("30") == 30 and duration("5m") == 300 and duration("1.5h") == 5400
    for bad in ("", "5 minutes", "0s", "-1", "0.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            duration(bad)


def test_the_containers_user_database_is_read_as_text(tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\nbroken line\nvllm:x:1000:1000::"
                      ":/bin/sh\n")
    users = Database(str(passwd), "pw")
    assert users.by_id(1000).pw_name == "vllm" and users.by_id(1000).pw_dir == "/"
    assert users.by_name("root").pw_uid == 0
    with pytest.raises(KeyError):
        users.by_id(7)
    assert Database(str(tmp_path / "none"), "gr").load() == []


def test_a_root_whose_pid_left_its_namespace_is_not_entered(tmp_path):
    """node_chroot refuses a /proc/PID/root whose process is no longer in the mount
    namespace the agent found (a pid reused since the scan)."""
    import os
    from fleetcheck.node_chroot import open_root
    here = "/proc/%d" % os.getpid()
    namespace = os.readlink(here + "/ns/mnt")
    os.close(open_root(here + "/root", namespace))
    with pytest.raises(SystemExit, match="the server is gone"):
        open_root(here + "/root", "mnt:[1]")
    with pytest.raises(SystemExit, match="cannot enter"):
        open_root(str(tmp_path / "nope" / "root"), namespace)


CID = "1c9e369bc85cfc8a9a1e6438552b44942800b43755d24d29d33158f20ab8d5de"


def test_a_containers_id_from_its_cgroup_and_its_log_from_kubelets_links(tmp_path):
    from fleetcheck.node_agent import container_id, pod_log, read_pod_log
    proc = tmp_path / "proc" / "42"
    proc.mkdir(parents=True)
    (proc / "cgroup").write_text(
        "0::/kubepods.slice/kubepods-pod0a1b.slice/cri-containerd-%s.scope\n" % CID)
    assert container_id(42, str(tmp_path / "proc")) == CID
    (proc / "cgroup").write_text("0::/user.slice\n")
    assert container_id(42, str(tmp_path / "proc")) is None

    pods = tmp_path / "pods" / "inference_vllm-0_uid" / "vllm"
    pods.mkdir(parents=True)
    lines = [b"2026-12-04T10:00:00.%06dZ stdout F line %d" % (i, i) for i in range(2000)]
    lines.insert(1, b"2026-12-04T10:00:00.5Z stdout P half a ")
    (pods / "0.log").write_bytes(b"\n".join(lines) + b"\n")
    links = tmp_path / "containers"
    links.mkdir()
    os.symlink(pods / "0.log", links / ("vllm-0_inference_vllm-%s.log" % CID))
    path = pod_log(str(links), CID)
    assert path is not None and pod_log(str(links), "f" * 64) is None
    whole = read_pod_log(path, 1 << 20, 1 << 10)
    assert whole.tail is None and whole.error is None
    assert whole.head.startswith(b"line 0\nhalf a line 1\nline 2\n")
    assert whole.source == "kubelet's log %s" % (pods / "0.log")
    cut = read_pod_log(path, 200, 120)
    assert cut.head.startswith(b"line 0\n") and cut.head.endswith(b"\n")
    assert cut.tail.endswith(b"line 1999\n") and len(cut.head) < 200


def test_a_bug_in_a_round_costs_that_round_not_the_agent(monkeypatch, capsys):
    from fleetcheck import node_agent
    from fleetcheck.cli import build_parser
    from fleetcheck.playbook import load_playbook
    from fleetcheck.results import RunResult
    calls = []

    def round_(playbook, options, cancel):
        calls.append(options.node)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        cancel.set()  # as SIGTERM does
        return RunResult(started_at="2026-12-04T10:00:00+00:00", inventory="", playbook="")

    monkeypatch.setattr(node_agent, "node_round", round_)
    args = build_parser().parse_args(["node", "--every", "1s", "--no-cache", "--node-name",
                                      "n1"])
    assert node_agent.command_node(args, load_playbook(None)) == 0
    assert calls == ["n1", "n1"]
    assert "internal error while running a round: RuntimeError: a bug" in \
        capsys.readouterr().err


def test_the_chroot_prelude_names_the_namespace_the_probe_reads_paths_in():
    """The probe context takes the namespace the prelude entered as its own, by one name."""
    from fleetcheck import node_chroot
    from fleetcheck.probe import context, trust
    assert node_chroot.PATHS_NAMESPACE == context.PATHS_NAMESPACE
    assert node_chroot.KEPT_PROC_FD == trust.KEPT_PROC_FD
