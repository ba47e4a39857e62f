"""What the controller does with a container engine's log: the install's formats come
from the host, so their regexes are built here and the hostile ones left out; kubelet's
CRI lines become the lines the server wrote."""

from __future__ import annotations

import time

import pytest

from fleetcheck.connectors.base import EngineLog, Session
from fleetcheck.connectors.container import cri_text
from fleetcheck.engine_logs import MAX_CONVERSIONS, fill_engine_logs, formats_of, joined

pytestmark = pytest.mark.unit

AUX = {"file": "vllm/v1/worker/gpu_model_runner.py", "line": 4242,
       "format": "Using auxiliary layers from speculative config: %s", "args": ["aux_layers"]}
STARTUP = (b"INFO 12-02 11:00:00 [gpu_model_runner.py:4242] Using auxiliary layers from "
           b"speculative config: (1, 2)\n")


class GivenLog(Session):
    """A session whose engine log is the bytes given (the reading itself is tested on real
    Podman and the kubectl stand-in in test_served_real_vllm.py)."""

    def __init__(self, log: EngineLog | None):
        self.log, self.asked = log, 0

    def engine_log(self, head_bytes, tail_bytes, cancel=None):
        self.asked += 1
        return self.log


def facts(formats, stream=True) -> dict:
    log = {"source": None, "tried": [], "engine_stream": stream}
    return {"served": {"servers": [{"pid": 1, "log": log}], "log_formats": formats}}


def test_the_engines_log_is_parsed_by_the_formats_the_probe_sent():
    found = facts({"aux_layers": [AUX]})
    fill_engine_logs(found, GivenLog(EngineLog("podman logs served", STARTUP, None)))
    log = found["served"]["servers"][0]["log"]
    assert "log_formats" not in found["served"]  # consumed, never reported
    assert log["source"] == "podman logs served" and log["aux_layers"]["ids"] == [1, 2]
    assert log["aux_layers"]["format"] == "vllm/v1/worker/gpu_model_runner.py:4242"


def test_what_the_host_sends_is_split_here_and_a_hostile_format_is_left_out():
    given = dict(AUX, format="Using auxiliary layers %s", regex="(a+)+$", literals=["x"])
    slow = dict(AUX, format="%s" * (MAX_CONVERSIONS + 1))
    short = dict(AUX, format="ids %s")  # its longest literal would find every line
    built = formats_of({"aux_layers": [given, slow, short, "junk"], 7: [AUX],
                        "made-up": [AUX]})
    assert list(built) == ["aux_layers"]
    assert [(t["literals"], t["conversions"]) for t in built["aux_layers"]] == [
        (["Using auxiliary layers ", ""], ["s"])]
    assert "regex" not in built["aux_layers"][0]


def test_many_long_formats_built_to_match_slowly_cost_a_scan_of_the_lines():
    """Sixteen fatal formats of near-identical 400-character literals on lines that almost
    hold them: each line costs a substring search per format, not a backtracking regex."""
    almost = "a" * 390
    formats = [dict(AUX, format=almost + "%s" + "b%02d" % i) for i in range(16)]
    line = (almost + "a" * 15000 + "\n").encode()
    started = time.process_time()
    found = facts({"fatal": formats})
    fill_engine_logs(found, GivenLog(EngineLog("podman logs served", line * 128, None)))
    assert time.process_time() - started < 2
    assert found["served"]["servers"][0]["log"]["fatal"] == []


def test_a_format_built_to_backtrack_costs_a_scan_of_the_line():
    """A format of many conversions on long lines that hold its longest literal but not
    the others: each line is scanned a few times, whatever the format."""
    line = b"a" + b"x" * 16000 + b"c never at all\n"
    started = time.process_time()
    found = facts({"fatal": [dict(AUX, format="a%sb%sc%s%s%s never at all")]})
    fill_engine_logs(found, GivenLog(EngineLog("podman logs served", line * 60, None)))
    assert time.process_time() - started < 2
    assert found["served"]["servers"][0]["log"]["fatal"] == []


def test_no_server_on_the_containers_stream_reads_no_log():
    session = GivenLog(EngineLog("podman logs served", STARTUP, None))
    found = facts({"aux_layers": [AUX]}, stream=False)
    fill_engine_logs(found, session)
    assert session.asked == 0 and found["served"]["servers"][0]["log"]["source"] is None


def test_an_engine_that_cannot_give_the_log_is_named_in_what_was_tried():
    found = facts({"aux_layers": [AUX]})
    fill_engine_logs(found, GivenLog(EngineLog("docker logs served", b"", None,
                                               "Error: configured logging driver does not "
                                               "support reading")))
    log = found["served"]["servers"][0]["log"]
    assert log["source"] is None
    assert log["tried"] == ["docker logs served: Error: configured logging driver does not "
                            "support reading"]


def test_kubelets_cri_lines_are_the_lines_the_server_wrote():
    data = (b"2026-12-02T11:00:00.1Z stdout F INFO started\n"
            b"2026-12-02T11:00:00.2Z stderr P Using auxiliary layers from \n"
            b"2026-12-02T11:00:00.3Z stderr F speculative config: (1, 2)\n"
            b"not a CRI line\n"
            b"2026-12-02T11:00:01.0Z stdout F \n")
    assert cri_text(data) == (b"INFO started\nUsing auxiliary layers from speculative "
                              b"config: (1, 2)\n\n")


def test_a_log_shorter_than_head_and_tail_is_read_once():
    """An engine's log of 1.9 MiB read as its first MiB and its last MiB: the middle comes
    back twice, and the log is read once, whole, every line numbered."""
    engine = dict(AUX, format="Initializing a V1 LLM engine (v%s) with config: %s",
                  args=["VLLM_VERSION", "vllm_config"])
    lines = [b"INFO 12-02 11:00:%02d line %06d of a busy server\n" % (i % 60, i)
             for i in range(40000)]
    lines[20000] = (b"INFO 12-02 11:00:00 [gpu_model_runner.py:4242] Initializing a V1 LLM "
                    b"engine (v0.33.0) with config: model='m'\n")
    log = b"".join(lines)
    head, tail = log[:1 << 20], log[-(1 << 20):]
    assert len(log) < len(head) + len(tail) and lines[20000] in head and lines[20000] in tail
    assert joined(head, tail) == (log, None)
    found = facts({"engine": [engine]})
    fill_engine_logs(found, GivenLog(EngineLog("podman logs served", head, tail)))
    read = found["served"]["servers"][0]["log"]
    assert read["startups"] == 1 and read["lines_read"] == 40000 and read["cut"] is False
    assert read["engine"]["line"] == 20001
    assert joined(b"abc", b"xyz") == (b"abc", b"xyz")
    short = log[:5000]  # an overlap shorter than the part of the tail looked for
    assert joined(short[:3000], short[2500:]) == (short, None)


def test_hostile_shapes_in_what_the_probe_sent_are_no_bug_of_fleetcheck():
    """The hook runs before the facts' types are checked: odd shapes are left out, and
    the typed decoding after it says what is wrong with them."""
    for shaped in ({"served": {"servers": 5, "log_formats": {"aux_layers": [AUX]}}},
                   {"served": {"servers": [{"pid": 1, "log": {"engine_stream": True,
                                                               "source": None, "tried": 7}}],
                               "log_formats": {"aux_layers": [dict(AUX, args=5)]}}},
                   {"served": {"servers": [{"pid": 1, "log": {"engine_stream": True,
                                                               "source": None, "tried": "ab"}}],
                               "log_formats": {"aux_layers": 5}}}):
        fill_engine_logs(shaped, GivenLog(EngineLog("podman logs served", STARTUP, None)))


def test_matching_lines_as_long_as_the_controller_reads_cost_a_scan():
    """Kept lines of 16 KiB (a fatal line, an engine line) are cut before they are
    redacted or their speculative config is read."""
    fatal = dict(AUX, format="DFlash drafter expects %s concatenated aux hidden features")
    engine = dict(AUX, format="Initializing a V1 LLM engine (v%s) with config: %s",
                  args=["VLLM_VERSION", "vllm_config"])
    lines = (b"INFO 12-02 11:00:00 [gpu_model_runner.py:4242] Initializing a V1 LLM engine "
             b"(v1) with config: SpeculativeConfig(" + b"a" * 16000 + b"=1)\n") * 5 + (
        b"ValueError: DFlash drafter expects " + b"a" * 16000 +
        b" concatenated aux hidden features\n") * 5  # the last start-up's fatal lines
    started = time.process_time()
    found = facts({"fatal": [fatal], "engine": [engine]})
    fill_engine_logs(found, GivenLog(EngineLog("podman logs served", lines, None)))
    assert time.process_time() - started < 2
    assert len(found["served"]["servers"][0]["log"]["fatal"]) == 5


def test_servers_sharing_the_containers_stream_get_no_log_of_one_of_them():
    session = GivenLog(EngineLog("podman logs served", STARTUP, None))
    log = {"source": None, "tried": [], "engine_stream": True}
    found = {"served": {"servers": [{"pid": 1, "log": dict(log)}, {"pid": 2, "log": dict(log)}],
                        "log_formats": {"aux_layers": [AUX]}}}
    fill_engine_logs(found, session)
    assert session.asked == 0
    for server in found["served"]["servers"]:
        assert server["log"]["source"] is None
        assert "2 servers write to the container's one stream" in server["log"]["tried"][0]


class BoxAnswers(Session):
    """The box's side of ContainerSession.engine_log: what its log script printed, built
    from `raw` (kubelet's CRI file) read as the script reads it. (The script itself runs
    on a real containerd node in test_container_engines.py.)"""

    def __init__(self, raw: bytes, path: bytes):
        self.raw, self.path = raw, path

    def run(self, command, payload, cancel=None, answer=None):
        import re as regex
        from fleetcheck.connectors.base import CommandResult
        mark = regex.search(r"mark=(fleetcheck-log-[0-9a-f]+)", command).group(1).encode()
        head = int(regex.search(r"head=(\d+)", command).group(1))
        tail = int(regex.search(r"tail=(\d+)", command).group(1))
        out = self.path + b"\n" + self.raw[:head] + b"\n" + mark + b"\n" + self.raw[-tail:]
        return CommandResult(out, b"", 0)


def test_a_cri_head_cut_inside_a_line_still_joins_its_tail():
    """kubelet's file read from both ends, the head's cut falling inside a line's text:
    the cut line is not taken for a whole one, so the overlap is found and a start-up in
    it is counted once."""
    from fleetcheck.connectors.base import Deadline
    from fleetcheck.connectors.container import ContainerSession, KubeName, Placement
    engine = dict(AUX, format="Initializing a V1 LLM engine (v%s) with config: %s",
                  args=["VLLM_VERSION", "vllm_config"])
    lines = [b"2026-12-02T11:00:00.%06dZ stdout F INFO line %06d of a busy server\n" % (i, i)
             for i in range(30000)]
    lines[15000] = (b"2026-12-02T11:00:01.000000Z stdout F INFO 12-02 11:00:01 "
                    b"[gpu_model_runner.py:4242] Initializing a V1 LLM engine "
                    b"(v0.33.0) with config: model='m'\n")
    raw = b"".join(lines)
    placed = Placement("ctr", "c1", address="/run/containerd/containerd.sock",
                       namespace="k8s.io", kube=KubeName("vllm-0", "vllm", "serving"))
    for cut in (35, 45):  # inside the text of a line
        head_bytes = sum(len(line) for line in lines[:16000]) + cut
        session = ContainerSession(BoxAnswers(raw, b"/var/log/pods/x/vllm/0.log"), None,
                                   Deadline(30), placed)
        read = session.engine_log(head_bytes, len(raw) - 5000)
        assert read.tail is not None and read.error is None
        found = facts({"engine": [engine]})
        fill_engine_logs(found, GivenLog(read))
        log = found["served"]["servers"][0]["log"]
        assert log["startups"] == 1 and log["lines_read"] == 30000, (cut, log["lines_read"])
