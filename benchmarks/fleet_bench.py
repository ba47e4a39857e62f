"""fleetcheck against what people would use instead, on N real sshd hosts holding real vLLM
installs (loopback addresses, one mount + PID namespace per host; alternating 0.20.1 and
0.33.0 pip installs at /opt/ml-env).

    python3 benchmarks/fleet_bench.py                      # 50 hosts, all tools, 3 rounds
    python3 benchmarks/fleet_bench.py --hosts 50 200 500 --rounds 3 --write

Tools, interleaved round by round (medians reported):
  fleetcheck     `fleetcheck run` with default static checks + quick integrity (no smoke)
  fleetcheck-own the same with --no-shared-analysis (every host analyses its own files)
  openssh-loop   `xargs -P` of `ssh host '<greps + cat _version.py>'`, one connection each
  ansible        ansible ad-hoc `shell` with the same greps: pipelining on, ControlPersist on
                 but cold for each run, forks = parallelism, interpreter fixed (no discovery)
  pyinfra        `pyinfra exec` of the same greps (paramiko over gevent)
  fabric         a naive fabric ThreadingGroup running the greps
  paramiko-true  bare paramiko connect + `true` per host (the floor on one machine)

    python3 benchmarks/fleet_bench.py --equal-work --hosts 50 --parallel 16 --write
    python3 benchmarks/fleet_bench.py --cold-warm --hosts 50 500 --parallel 16 --write
    python3 benchmarks/fleet_bench.py --descriptors --hosts 500 --parallel 500 --write

--equal-work: every tool runs fleetcheck's own probe (the same bundle and plan, on stdin)
on every host, so the hosts' work is the same and the table measures orchestration:
  fleetcheck-own   `fleetcheck run --no-shared-analysis --no-cache`: exactly that work
  fleetcheck       the default (shared analysis), cache off; fleetcheck-warm: cache warm
  probe-paramiko   paramiko threads: connect, exec the probe command, payload on stdin
  probe-openssh    `xargs -P` of `ssh host CMD < payload`
  probe-fabric     Fabric Connections in threads, the payload as in_stream (64 KiB reads)
  probe-ansible    `ansible -m script` of a carrier that decodes the same payload into the
                   same command's stdin (pipelining, cold ControlPersist; answers via --tree)
  probe-pyinfra    `pyinfra server.script` of the same carrier
--cold-warm: fleetcheck with the analysis cache off and warm (the warm-up run learns it).
--descriptors: fleetcheck alone, -j up to every host at once, started as a user's shell
starts it (soft RLIMIT_NOFILE 1024): wall time, the controller's peak count of open
descriptors (/proc/PID/fd sampled every 5 ms) with the sockets among them, and the soft
limit it ran under.
The analysis cache of every fleetcheck row lives in the run's temporary directory.
Measured per tool with GNU time: wall, CPU of the tool's process tree on the controller
(user+sys; for fleetcheck that is the controller alone, since it spawns nothing), peak RSS.
The hosts' sshd and probe work shares the same 2 cores, so wall time weighs total CPU.
Hosts see Debian's stock root .bashrc; --machine-bashrc keeps this machine's (pyenv init,
~0.13 s CPU per SSH session for every tool: the conditions the issue's reference figures
were measured in).
Every Python tool runs from a venv of its own under ~/.cache/fleetcheck/bench: ansible-core,
pyinfra, and fleetcheck (editable: this checkout; the venv is named by the checkout's path,
and the benchmark refuses one that imports another checkout) whose venv also runs
paramiko-true and Fabric (fleetcheck depends on both).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import statistics
import resource
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import probe_cost  # noqa: E402
from fleetcheck.lab.wheels import CACHE, real_install  # noqa: E402
from results_file import provenance, write_section  # noqa: E402
from fleetcheck.lab.testhosts import LoopbackFleet  # noqa: E402

ENV = "/opt/ml-env"
BENCH_VENVS = os.path.join(CACHE, "bench")
GREPS = ("cd /opt/ml-env/lib/python3*/site-packages && "
         "grep -n 'target_layer_ids' vllm/v1/worker/gpu_model_runner.py; "
         "grep -n 'sliding_window\\|layer_types' vllm/model_executor/models/qwen3_dflash.py; "
         "grep -n 'eagle_block_drop\\|def use_eagle' vllm/config/speculative.py; "
         "cat vllm/_version.py")


def tool_venv(name: str, *install: str, venv_name: str | None = None) -> str:
    """A venv of its own for a tool, with `pip install <install>` (once, cached); the
    path of its `name` program."""
    venv = os.path.join(BENCH_VENVS, venv_name or name)
    binary = os.path.join(venv, "bin", name)
    if not os.path.exists(binary):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", *install],
                       check=True)
    return binary


def fleetcheck_python() -> str:
    """The Python that runs fleetcheck, paramiko-true and Fabric: a venv of its own with
    fleetcheck installed editable (so it runs this checkout) and its dependencies, as
    pyinfra and Ansible run from theirs. The machine's own Python here processes a
    sandbox-written .pth file that imports certifi at every start (~25 ms CPU per process),
    which neither a user's install nor the other tools' venvs have."""
    # keyed by this checkout's path: an editable venv built from another checkout would
    # run that checkout's code
    checkout = hashlib.sha256(os.path.realpath(ROOT).encode()).hexdigest()[:12]
    binary = tool_venv("fleetcheck", "-e", ROOT + "[bench]", "--config-settings",
                       "editable_mode=compat", venv_name="fleetcheck-" + checkout)
    python = os.path.join(os.path.dirname(binary), "python")
    where = subprocess.run([python, "-c", "import fleetcheck; print(fleetcheck.__file__)"],
                           capture_output=True, text=True, cwd="/", check=True).stdout.strip()
    assert os.path.realpath(where).startswith(os.path.realpath(ROOT) + os.sep), (
        "the benchmark's fleetcheck venv runs %s, not this checkout" % where)
    return python


def installed_env(env: dict | None) -> dict:
    """Every tool runs as it runs once installed: with Python's bytecode cache (the
    warm-up round writes it). A machine that sets PYTHONDONTWRITEBYTECODE=1, as this
    sandbox does, makes every start compile every module from source, a cost no installed
    tool pays (pip compiles a wheel's modules at install): for fleetcheck ~0.2 s a run."""
    out = dict(os.environ if env is None else env)
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def timed(argv: list[str], env: dict | None = None, cwd: str | None = None,
          nofile: int | None = None) -> dict:
    """Wall, user+sys CPU of the whole process tree, and peak RSS (GNU time), of a tool
    run as installed (see installed_env). With `nofile`, the tool starts under that soft
    RLIMIT_NOFILE, and its peak count of open descriptors and the highest soft limit it
    ran under are sampled (see Descriptors)."""
    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE,
                               (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out, \
            tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(["/usr/bin/time", "-o", out.name, "-f", "%U %S %M"] + argv,
                                stdout=subprocess.DEVNULL, stderr=err,
                                preexec_fn=limit if nofile is not None else None,
                                env=installed_env(env), cwd=cwd)
        watch = Descriptors(proc.pid) if nofile is not None else None
        proc.wait()
        wall = time.perf_counter() - started
        user, system, rss_kb = out.read().split()[-3:]
        err.seek(0)
        stderr = err.read()
    result = {"wall": wall, "cpu": float(user) + float(system), "rss_mb": int(rss_kb) / 1024,
              "rc": proc.returncode, "ok": proc.returncode == 0,
              "stderr": stderr[-400:].decode("utf-8", "replace")}
    if watch is not None:
        result.update(watch.stop())
    return result


class Descriptors:
    """The peak number of open descriptors of the tool (the child of GNU time), how many
    of them were sockets at that peak (one per SSH host connected), and the highest soft
    RLIMIT_NOFILE seen, by sampling /proc from a thread until stopped."""

    def __init__(self, time_pid: int):
        self.time_pid = time_pid
        self.peak = 0
        self.sockets = 0
        self.soft = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _tool_pid(self) -> int | None:
        try:
            with open("/proc/%d/task/%d/children" % (self.time_pid, self.time_pid)) as handle:
                children = handle.read().split()
        except OSError:
            return None
        return int(children[0]) if children else None

    def _sample(self) -> None:
        pid = None
        while not self.done.is_set():
            pid = pid or self._tool_pid()
            if pid is not None:
                try:
                    fds = os.listdir("/proc/%d/fd" % pid)
                    if len(fds) > self.peak:
                        self.peak = len(fds)
                        self.sockets = sum(self._is_socket(pid, fd) for fd in fds)
                    with open("/proc/%d/limits" % pid) as handle:
                        line = next(l for l in handle if l.startswith("Max open files"))
                    self.soft = max(self.soft, int(line.split()[3]))
                except (OSError, StopIteration, ValueError):
                    pass
            time.sleep(0.005)

    @staticmethod
    def _is_socket(pid: int, fd: str) -> bool:
        try:
            return os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            return False

    def stop(self) -> dict:
        self.done.set()
        self.thread.join()
        return {"peak_fds": self.peak, "peak_sockets": self.sockets, "soft_limit": self.soft}


class Bench:
    def __init__(self, hosts: int, parallel: int, workdir: str, flood: bool = False,
                 machine_bashrc: bool = False):
        self.workdir = workdir
        self.parallel = parallel
        self.python = fleetcheck_python()
        venvs = [real_install("0.20.1"), real_install("0.33.0")]
        self.fleet = LoopbackFleet(os.path.join(workdir, "fleet"), first_octet=1 + hosts // 250,
                                   stock_bashrc=not machine_bashrc)
        for i in range(hosts):
            # sftp: Ansible's `script` and pyinfra's `server.script` upload through it
            self.fleet.add("gpu%03d" % i, mounts={ENV: venvs[i % 2]},
                           sshd_options={"Subsystem": "sftp internal-sftp"})
        if flood:
            self.fleet.add("flood", sshd_options={"ForceCommand": "head -c 300000000 /dev/zero"})
        self.fleet.start(timeout=120)
        self.hosts = self.fleet.hosts
        self.addresses = [h.address for h in self.hosts]
        self.key = self.fleet.client_key
        self.known = self.fleet.known_hosts
        self._write_inventories()
        self._probe_files()

    def _write_inventories(self) -> None:
        import yaml
        self.inventory = os.path.join(self.workdir, "inventory.yaml")
        with open(self.inventory, "w") as handle:
            yaml.safe_dump({"all": {"vars": {"venv": ENV, "ansible_user": "root", "key": self.key},
                                    "hosts": {h.name: {"ansible_host": h.address}
                                              for h in self.hosts}}}, handle, sort_keys=False)
        self.ansible_inventory = os.path.join(self.workdir, "ansible.ini")
        with open(self.ansible_inventory, "w") as handle:
            handle.write("[fleet]\n")
            for h in self.hosts:
                handle.write("%s ansible_host=%s\n" % (h.name, h.address))
            handle.write("[fleet:vars]\nansible_user=root\nansible_python_interpreter=/usr/bin/python3\n"
                         "ansible_ssh_private_key_file=%s\n" % self.key)
        self.pyinfra_inventory = os.path.join(self.workdir, "pyinfra_inventory.py")
        with open(self.pyinfra_inventory, "w") as handle:
            handle.write("hosts = %r\n" % self.addresses)
        self.host_file = os.path.join(self.workdir, "hosts.txt")
        with open(self.host_file, "w") as handle:
            handle.write("\n".join(self.addresses) + "\n")

    def fleetcheck_own(self) -> dict:
        return self.fleetcheck("--no-shared-analysis")

    def fleetcheck_warm(self) -> dict:
        """The default with the analysis cache on: after the warm-up run every build is
        cached, so no host ships bytes and every host verifies."""
        return self.fleetcheck(cache=True)

    def fleetcheck_descriptors(self) -> dict:
        """The default run started under a user shell's usual soft limit of 1024
        descriptors, its descriptors sampled."""
        return self.fleetcheck(nofile=USER_SOFT_NOFILE)

    def fleetcheck(self, *extra: str, cache: bool = False, nofile: int | None = None) -> dict:
        out = os.path.join(self.workdir, "out")
        # the cache lives in this run's workdir; the other rows run cold (--no-cache), as
        # every run did before the cache existed
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(self.workdir, "xdg-cache"))
        result = timed([self.python, "-m", "fleetcheck", "run", self.inventory,
                        "--known-hosts", self.known, "-j", str(self.parallel), "--no-smoke",
                        "--timeout", "120", "--json", out + ".json", "--html", out + ".html",
                        *extra, *(() if cache else ("--no-cache",))], cwd=ROOT, env=env,
                       nofile=nofile)
        with open(out + ".json") as handle:
            data = json.load(handle)
        summary = data["summary"]["by_status"]
        result["cached_hosts"] = sum((h.get("analysis") or "").startswith(
            "fix analysis from the controller's cache") for h in data["hosts"])
        result["ok"] = summary["pass"] + summary["fail"] == len(self.addresses) - (
            1 if "flood" in [h.name for h in self.hosts] else 0)
        return result

    def openssh_loop(self) -> dict:
        ssh = ("ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=%s "
               "-i %s root@{} %s" % (self.known, self.key, shlex.quote(GREPS)))
        result = timed(["sh", "-c", "xargs -P %d -I{} %s < %s > /dev/null" % (
            self.parallel, ssh, self.host_file)])
        return result

    def ansible(self, persist: bool = True, module: tuple[str, str] = ("shell", GREPS),
                tree: str | None = None) -> dict:
        binary = tool_venv("ansible", "ansible-core")
        control = tempfile.mkdtemp(prefix="ansible-cp-", dir="/tmp")  # cold every run
        args = "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes" % self.known
        if persist:
            args += " -o ControlMaster=auto -o ControlPersist=60s"
        env = dict(os.environ, ANSIBLE_PIPELINING="1", ANSIBLE_SSH_ARGS=args,
                   ANSIBLE_SSH_CONTROL_PATH_DIR=control, ANSIBLE_HOST_KEY_CHECKING="True",
                   ANSIBLE_FORKS=str(self.parallel), ANSIBLE_LOCAL_TEMP=control,
                   ANSIBLE_STDOUT_CALLBACK="minimal")
        result = timed([binary, "all", "-i", self.ansible_inventory, "-m", module[0],
                        "-a", module[1], "-f", str(self.parallel)]
                       + (["--tree", tree] if tree else []), env=env)
        if tree:
            for name in os.listdir(tree):  # --tree holds module results: the answer inside
                path = os.path.join(tree, name)
                with open(path) as handle:
                    stdout = json.load(handle).get("stdout", "")
                with open(path, "w") as handle:
                    handle.write(stdout)
            result["ok"] = result["ok"] and self._answers_ok()
        subprocess.run(["sh", "-c", "for s in %s/*; do ssh -o ControlPath=$s -O exit x "
                        ">/dev/null 2>&1; done" % control])
        return result

    def pyinfra(self) -> dict:
        binary = tool_venv("pyinfra", "pyinfra")
        result = timed([binary, "-y", "--parallel", str(self.parallel), "--ssh-user", "root",
                        "--ssh-key", self.key, "--data", "ssh_known_hosts_file=%s" % self.known,
                        "--data", "ssh_strict_host_key_checking=yes", self.pyinfra_inventory,
                        "exec", "--", GREPS], cwd=self.workdir)
        return result

    def fabric(self) -> dict:
        script = ("import fabric,sys\n"
                  "g=fabric.ThreadingGroup(*sys.argv[3:],user='root',"
                  "connect_kwargs={'key_filename':sys.argv[1]})\n"
                  "r=g.run(sys.argv[2],hide=True,warn=True)\n"
                  "sys.exit(0 if len(r.succeeded)==len(sys.argv[3:]) else 1)\n")
        result = timed([self.python, "-c", script, self.key, GREPS] + self.addresses)
        return result

    def paramiko_true(self) -> dict:
        script = ("import paramiko,sys\nfrom concurrent.futures import ThreadPoolExecutor\n"
                  "key=paramiko.PKey.from_path(sys.argv[1])\n"
                  "def one(a):\n c=paramiko.SSHClient();c.load_host_keys(sys.argv[2])\n"
                  " c.connect(a,username='root',pkey=key,look_for_keys=False,allow_agent=False)\n"
                  " _,o,_=c.exec_command('true');o.channel.recv_exit_status();c.close()\n"
                  "with ThreadPoolExecutor(int(sys.argv[3])) as p: list(p.map(one,sys.argv[4:]))\n")
        result = timed([self.python, "-c", script, self.key, self.known, str(self.parallel)]
                       + self.addresses)
        return result

    # Equal work: every tool runs fleetcheck's own probe (the same bundle and plan, on
    # stdin) on every host, so only the orchestration differs. The plan is `run`'s for
    # these hosts without shared analysis (no tool but fleetcheck answers its question).
    # Ansible and pyinfra cannot feed a remote command's stdin: they run a carrier script
    # (uploaded, as their `script` operations do) that decodes the same bytes into the
    # same command's stdin.

    def _probe_files(self) -> None:
        import base64
        from fleetcheck.inventory import Host
        from fleetcheck.playbook import load_playbook
        from fleetcheck.wire_protocol import host_plan, probe_command, probe_payload
        playbook = load_playbook()
        host = Host(name="h", address="h", venv=ENV)
        plan = host_plan(host, playbook.probe_signatures(), playbook.integrity.plan(), 120.0)
        plan["share_analysis"] = False
        self.probe_command = probe_command(host.connection_settings())
        self.payload = os.path.join(self.workdir, "probe-payload.bin")
        with open(self.payload, "wb") as handle:
            handle.write(probe_payload(plan))
        with open(self.payload, "rb") as handle:
            encoded = base64.encodebytes(handle.read()).decode("ascii")
        self.carrier = os.path.join(self.workdir, "probe-carrier.sh")
        with open(self.carrier, "w") as handle:
            handle.write("#!/bin/sh\nbase64 -d <<'FLEETCHECK_PAYLOAD' | %s\n%sFLEETCHECK_PAYLOAD\n"
                         % (self.probe_command, encoded))
        self.answers = os.path.join(self.workdir, "answers")
        os.makedirs(self.answers, exist_ok=True)
        with open(os.path.join(self.workdir, "probe-command.txt"), "w") as handle:
            handle.write(self.probe_command)

    def _answers_ok(self) -> bool:
        """Every host's saved answer is the probe's facts (checked after timing)."""
        good = 0
        for name in os.listdir(self.answers):
            path = os.path.join(self.answers, name)
            try:
                with open(path) as handle:
                    good += "probe_version" in json.load(handle)
            except (OSError, ValueError):
                pass
            os.unlink(path)
        return good == len(self.addresses)

    def probe_paramiko(self) -> dict:
        """The floor for the work: paramiko threads, connect, one exec of the probe with
        its payload on stdin, read the answer."""
        script = ("import paramiko,sys,json\nfrom concurrent.futures import ThreadPoolExecutor\n"
                  "key=paramiko.PKey.from_path(sys.argv[1]);cmd=open(sys.argv[4]).read()\n"
                  "data=open(sys.argv[5],'rb').read()\n"
                  "def one(a):\n c=paramiko.SSHClient();c.load_host_keys(sys.argv[2])\n"
                  " c.connect(a,username='root',pkey=key,look_for_keys=False,allow_agent=False)\n"
                  " i,o,_=c.exec_command(cmd);i.write(data);i.channel.shutdown_write()\n"
                  " out=o.read();c.close();return 'probe_version' in json.loads(out)\n"
                  "with ThreadPoolExecutor(int(sys.argv[3])) as p: r=list(p.map(one,sys.argv[6:]))\n"
                  "sys.exit(0 if all(r) else 1)\n")
        return timed([self.python, "-c", script, self.key, self.known, str(self.parallel),
                      os.path.join(self.workdir, "probe-command.txt"), self.payload]
                     + self.addresses)

    def probe_openssh(self) -> dict:
        one = os.path.join(self.workdir, "probe-one.sh")
        with open(one, "w") as handle:
            handle.write('exec ssh -o BatchMode=yes -o StrictHostKeyChecking=yes '
                         '-o UserKnownHostsFile=%s -i %s root@"$1" %s < %s > %s/"$1"\n'
                         % (self.known, self.key, shlex.quote(self.probe_command),
                            self.payload, self.answers))
        result = timed(["sh", "-c", "xargs -P %d -n 1 sh %s < %s" % (
            self.parallel, one, self.host_file)])
        result["ok"] = result["ok"] and self._answers_ok()
        return result

    def probe_fabric(self) -> dict:
        """Fabric Connections in threads, each running the probe with the payload as its
        in_stream (a ThreadingGroup shares one stream between hosts). Tuned: invoke reads a
        stream that is not a TTY one byte per 10 ms loop (~20 min for the 120 KB payload),
        so the stream hands out 64 KiB per read, and latin-1 carries the bytes unchanged
        through invoke's text layer."""
        script = ("import fabric,io,sys,json\nfrom concurrent.futures import ThreadPoolExecutor\n"
                  "cmd=open(sys.argv[2]).read();data=open(sys.argv[3],'rb').read()\n"
                  "class Chunks(io.StringIO):\n def read(self,n=-1):return super().read(65536)\n"
                  "def one(a):\n"
                  " with fabric.Connection(a,user='root',connect_kwargs={'key_filename':sys.argv[1]}) as c:\n"
                  "  r=c.run(cmd,hide=True,warn=True,encoding='latin-1',"
                  "in_stream=Chunks(data.decode('latin-1')))\n"
                  " return 'probe_version' in json.loads(r.stdout)\n"
                  "with ThreadPoolExecutor(int(sys.argv[4])) as p: r=list(p.map(one,sys.argv[5:]))\n"
                  "sys.exit(0 if all(r) else 1)\n")
        return timed([self.python, "-c", script, self.key,
                      os.path.join(self.workdir, "probe-command.txt"), self.payload,
                      str(self.parallel)] + self.addresses)

    def probe_ansible(self) -> dict:
        return self.ansible(module=("script", self.carrier), tree=self.answers)

    def probe_pyinfra(self) -> dict:
        binary = tool_venv("pyinfra", "pyinfra")
        return timed([binary, "-y", "--parallel", str(self.parallel), "--ssh-user", "root",
                      "--ssh-key", self.key, "--data", "ssh_known_hosts_file=%s" % self.known,
                      "--data", "ssh_strict_host_key_checking=yes", self.pyinfra_inventory,
                      "server.script", "src=%s" % self.carrier], cwd=self.workdir)

    def stop(self) -> None:
        self.fleet.stop()


TOOLS = ["fleetcheck", "fleetcheck_own", "paramiko_true", "openssh_loop", "pyinfra", "fabric",
         "ansible"]
# the equal-work table: fleetcheck_own does exactly the others' work on the hosts
EQUAL_TOOLS = ["fleetcheck_own", "fleetcheck", "fleetcheck_warm", "probe_paramiko",
               "paramiko_true", "probe_openssh", "probe_pyinfra", "probe_fabric", "probe_ansible"]
OTHERS = ["probe_paramiko", "probe_openssh", "probe_pyinfra", "probe_fabric", "probe_ansible"]
# the soft RLIMIT_NOFILE a login shell usually hands its programs (systemd's default)
USER_SOFT_NOFILE = 1024


def run_size(hosts: int, rounds: int, tools: list[str], parallel: int | None,
             flood: bool = False, machine_bashrc: bool = False) -> dict[str, list[dict]]:
    workdir = tempfile.mkdtemp(prefix="fleetcheck-bench-")
    bench = Bench(hosts, parallel or min(hosts, 64), workdir, flood=flood,
                  machine_bashrc=machine_bashrc)
    results: dict[str, list[dict]] = {tool: [] for tool in tools}
    try:
        for tool in tools:  # warm-up: page cache, tool imports
            getattr(bench, tool)()
        for _ in range(rounds):
            for tool in tools:
                results[tool].append(getattr(bench, tool)())
    finally:
        bench.stop()
    return results


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def tool_rows(results: dict[str, list[dict]], base: list[dict], hosts: int) -> list[str]:
    """One table row per tool: medians, and wall time against the table's baseline."""
    return ["| %s | %.2f | %.2fx | %.2f | %.1f | %.0f | %s |" % (
        tool.replace("_", "-"), median(runs, "wall"),
        median(runs, "wall") / median(base, "wall"), median(runs, "cpu"),
        1000 * median(runs, "cpu") / hosts, median(runs, "rss_mb"),
        "yes" if all(r["ok"] for r in runs) else "NO: " + runs[-1]["stderr"][-120:])
        for tool, runs in results.items()]


def table(hosts: int, results: dict[str, list[dict]], parallel: int) -> list[str]:
    base = results["fleetcheck"]
    lines = ["### %d hosts (parallelism %d, %d rounds, medians)" % (hosts, parallel, len(base)),
             "", "| tool | wall s | wall / fleetcheck | controller CPU s | CPU ms/host | "
             "peak RSS MB | all ok |", "|---|---|---|---|---|---|---|"]
    lines += tool_rows(results, base, hosts)
    return lines + [""] + targets(hosts, results)


def targets(hosts: int, results: dict[str, list[dict]]) -> list[str]:
    """The issue's targets for this table, each with its figure and whether it holds."""
    wall = {tool: median(runs, "wall") for tool, runs in results.items()}
    checks = []
    if "pyinfra" in wall:
        checks.append(("wall <= 1.0x pyinfra", wall["fleetcheck"] / wall["pyinfra"], 1.0, "x"))
    if "ansible" in wall:
        checks.append(("wall <= 1/3 of tuned Ansible", wall["fleetcheck"] / wall["ansible"],
                       1 / 3, "x"))
    checks.append(("controller CPU <= 15 ms/host",
                   1000 * median(results["fleetcheck"], "cpu") / hosts, 15.0, " ms"))
    checks.append(("peak RSS <= 300 MB", median(results["fleetcheck"], "rss_mb"), 300.0, " MB"))
    return ["- %s: %.2f%s, %s" % (name, value, unit, "holds" if value <= limit else "DOES NOT hold")
            for name, value, limit, unit in checks]


def equal_targets(hosts: int, results: dict[str, list[dict]]) -> list[str]:
    """The equal-work targets: wall <= the fastest other tool and <= 1/3 of tuned
    Ansible, controller CPU per host <= 1.2x the paramiko connect+`true` floor; for the
    equal-work row (fleetcheck_own) and for what a user runs (default, and warm)."""
    wall = {tool: median(runs, "wall") for tool, runs in results.items()}
    cpu = {tool: 1000 * median(runs, "cpu") / hosts for tool, runs in results.items()}
    others = [t for t in OTHERS if t in wall]
    fastest = min(others, key=lambda t: wall[t]) if others else None
    lines = []
    for tool in ("fleetcheck_own", "fleetcheck", "fleetcheck_warm"):
        if tool not in wall:
            continue
        checks = []
        if fastest:
            checks.append(("wall <= 1.0x the fastest other (%s)" % fastest.replace("_", "-"),
                           wall[tool] / wall[fastest], 1.0, "x"))
        if "probe_ansible" in wall:
            checks.append(("wall <= 1/3 of tuned Ansible", wall[tool] / wall["probe_ansible"],
                           1 / 3, "x"))
        if "paramiko_true" in cpu:
            checks.append(("CPU/host <= 1.2x paramiko connect+true",
                           cpu[tool] / cpu["paramiko_true"], 1.2, "x"))
        lines.append("- %s: %s" % (tool.replace("_", "-"), "; ".join(
            "%s: %.2f%s, %s" % (name, value, unit, "holds" if value <= limit else
                                "DOES NOT hold") for name, value, limit, unit in checks)))
    return lines


def equal_table(hosts: int, results: dict[str, list[dict]], parallel: int) -> list[str]:
    base = results["fleetcheck_own"]
    lines = ["### Equal work: %d hosts, every tool runs fleetcheck's probe (parallelism %d, "
             "%d rounds, medians)" % (hosts, parallel, len(base)), "",
             "| tool | wall s | wall / fleetcheck-own | controller CPU s | CPU ms/host | "
             "peak RSS MB | all ok |", "|---|---|---|---|---|---|---|"]
    lines += tool_rows(results, base, hosts)
    return lines + [""] + equal_targets(hosts, results)


def cold_warm_table(hosts: int, results: dict[str, list[dict]], parallel: int) -> list[str]:
    cold, warm = results["fleetcheck"], results["fleetcheck_warm"]
    return ["### %d hosts (parallelism %d, %d rounds, medians)" % (hosts, parallel, len(cold)),
            "", "| fleetcheck | wall s | controller CPU s | CPU ms/host | peak RSS MB | all ok |",
            "|---|---|---|---|---|---|"] + [
        "| %s | %.2f | %.2f | %.1f | %.0f | %s |" % (
            label, median(runs, "wall"), median(runs, "cpu"), 1000 * median(runs, "cpu") / hosts,
            median(runs, "rss_mb"), "yes" if all(r["ok"] for r in runs) else "NO")
        for label, runs in (("cold (--no-cache)", cold), ("warm", warm))] + [
        "", "- warm / cold wall: %.2fx; hosts that verified against the cache (so shipped "
        "nothing) in each warm round: %s of %d" % (
            median(warm, "wall") / median(cold, "wall"),
            ", ".join(str(r["cached_hosts"]) for r in warm), hosts)]


def descriptors_table(hosts: int, results: dict[str, list[dict]], parallel: int) -> list[str]:
    runs = results["fleetcheck_descriptors"]
    return ["### %d hosts, -j %d (%d rounds)" % (hosts, parallel, len(runs)), "",
            "| round | wall s | controller CPU s | peak open descriptors | sockets at the peak "
            "(hosts connected) | descriptors per host connected | soft limit: at start -> in "
            "the run | peak RSS MB | all ok |", "|---|---|---|---|---|---|---|---|---|"] + [
        "| %d | %.2f | %.2f | %d | %d | %.2f | %d -> %d | %.0f | %s |" % (
            index + 1, run["wall"], run["cpu"], run["peak_fds"], run["peak_sockets"],
            run["peak_fds"] / max(1, run["peak_sockets"]), USER_SOFT_NOFILE, run["soft_limit"],
            run["rss_mb"], "yes" if run["ok"] else "NO: " + run["stderr"][-120:])
        for index, run in enumerate(runs)] + [
        "", "- median wall %.2f s; median peak %d descriptors (start-up's included)" % (
            median(runs, "wall"), median(runs, "peak_fds"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[50])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=None)
    parser.add_argument("--tools", nargs="+", default=None, choices=TOOLS + EQUAL_TOOLS[2:])
    parser.add_argument("--scale-tools", nargs="+", default=None,
                        choices=TOOLS + EQUAL_TOOLS[2:], help="tools for sizes above the first")
    parser.add_argument("--flood", action="store_true",
                        help="also run fleetcheck on the largest size plus one flooding host")
    parser.add_argument("--machine-bashrc", action="store_true",
                        help="hosts keep this machine's root ~/.bashrc (default: Debian's "
                             "stock one, as on a GPU host; see lab/testhosts.STOCK_ROOT_BASHRC)")
    parser.add_argument("--equal-work", action="store_true",
                        help="the equal-work table instead: every tool runs fleetcheck's own "
                             "probe bundle and plan (default tools: %s)" % " ".join(EQUAL_TOOLS))
    parser.add_argument("--cold-warm", action="store_true",
                        help="fleetcheck with the analysis cache off (cold) and warm, at every "
                             "size given")
    parser.add_argument("--write", action="store_true",
                        help="write the tables into benchmarks/RESULTS.md (a section per "
                             "sizes x parallelism) and the probe's own cost")
    parser.add_argument("--descriptors", action="store_true",
                        help="fleetcheck alone, started under a soft limit of %d "
                             "descriptors: wall time and its peak open descriptors"
                             % USER_SOFT_NOFILE)
    args = parser.parse_args()
    if args.descriptors:
        args.tools = args.scale_tools = ["fleetcheck_descriptors"]
    if args.cold_warm:
        args.tools = args.scale_tools = ["fleetcheck", "fleetcheck_warm"]
    if args.tools is None:
        args.tools = EQUAL_TOOLS if args.equal_work else TOOLS
    if args.scale_tools is None:
        args.scale_tools = args.tools if args.equal_work else ["fleetcheck", "openssh_loop"]
    lines = []
    walls = {}
    for index, hosts in enumerate(args.hosts):
        tools = args.tools if index == 0 else args.scale_tools
        results = run_size(hosts, args.rounds, tools, args.parallel,
                           machine_bashrc=args.machine_bashrc)
        walls[hosts] = results.get("fleetcheck") or next(iter(results.values()))
        if args.descriptors:
            block = descriptors_table(hosts, results, args.parallel or min(hosts, 64))
        elif args.cold_warm:
            block = cold_warm_table(hosts, results, args.parallel or min(hosts, 64))
        else:
            block = (equal_table if args.equal_work else table)(hosts, results,
                                                                 args.parallel or min(hosts, 64))
        lines += block + [""]
        print("\n".join(block), flush=True)
    if len(args.hosts) > 1 and not (args.equal_work or args.cold_warm or args.descriptors):
        small, large = args.hosts[0], args.hosts[-1]
        ratio = median(walls[large], "wall") / median(walls[small], "wall")
        lines.append("fleetcheck scaling: %d hosts take %.2fx the %d-host wall time (%.1fx the "
                     "hosts); peak RSS at %d hosts: %.0f MB." % (
                         large, ratio, small, large / small, large,
                         median(walls[large], "rss_mb")))
    if args.flood and not (args.cold_warm or args.descriptors):
        hosts = args.hosts[-1]
        flood = run_size(hosts, 1, ["fleetcheck"], args.parallel, flood=True,
                         machine_bashrc=args.machine_bashrc)["fleetcheck"]
        lines.append("With one host flooding 300 MB of output besides %d healthy hosts: "
                     "fleetcheck peak RSS %.0f MB, wall %.1f s, every healthy host checked: %s."
                     % (hosts, flood[0]["rss_mb"], flood[0]["wall"], flood[0]["ok"]))
    print("\n".join(lines))
    if args.write:
        header = ["## fleetcheck against the tools people would use instead", ""] + provenance() + [
                  "Hosts' root shell start-up: %s." % (
                      "this machine's ~/.bashrc (pyenv init: ~0.13 s CPU per SSH session, "
                      "for every tool)" if args.machine_bashrc else
                      "Debian's stock root .bashrc (as on a GPU host)"), ""]
        if args.descriptors:
            header[0] = "## Descriptors: as many hosts in flight as -j allows"
            header.insert(2, "fleetcheck (default run, cache off) started under a soft "
                          "RLIMIT_NOFILE of %d, as a login shell usually starts it (hard "
                          "limit %d): it raises its own soft limit when -j needs more. Peak "
                          "open descriptors: /proc/PID/fd of the controller sampled every "
                          "5 ms, with the sockets among them at that moment (one per SSH "
                          "host connected); one warm-up run first. A host holds its socket "
                          "from the connect and 2 more (the pipe paramiko makes its channel "
                          "waitable with) once its command runs, so hosts still in the key "
                          "exchange count 1. How many are connected at once is bounded by "
                          "the CPU the hosts' sshd and probes share with the controller." % (
                              USER_SOFT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
            header.insert(3, "")
            write_section("descriptors-%s-j%s" % ("-".join(map(str, args.hosts)),
                                                  args.parallel or "auto"), header + lines)
            return
        if args.cold_warm:
            header[0] = "## Warm gates: fleetcheck with a cold and a warm analysis cache"
            header.insert(2, "cold: `--no-cache` (shared analysis: one lead per build ships "
                          "the bytes it read); warm: the cache holds both builds (the warm-up "
                          "run learned them), no host ships bytes, every host verifies by "
                          "sha256. Verdicts are the same in both (tests/test_analysis_cache.py).")
            header.insert(3, "")
            write_section("cold-warm-%s-j%s%s" % ("-".join(map(str, args.hosts)),
                                                 args.parallel or "auto",
                                                 "-machine-bashrc" if args.machine_bashrc else ""),
                          header + lines)
            return
        if args.equal_work:
            header[0] = "## Equal work: every tool runs fleetcheck's own probe"
            header.insert(2, "Every tool runs the same probe bundle and plan (`run`'s, without "
                          "shared analysis) on every host, its payload on stdin (Ansible "
                          "`script` and pyinfra `server.script` upload a carrier script that "
                          "decodes the same bytes into the same command's stdin): the hosts' "
                          "work is the same, the rest is orchestration. fleetcheck-own does "
                          "exactly that work; fleetcheck (shared analysis, cache off) and "
                          "fleetcheck-warm (cache warmed by the warm-up run) are what a user "
                          "runs.")
            header.insert(3, "")
        write_section("%sfleet-%s-j%s%s" % ("equal-" if args.equal_work else "",
                                            "-".join(map(str, args.hosts)), args.parallel or "auto",
                                            "-machine-bashrc" if args.machine_bashrc else ""),
                      header + lines)
        if args.equal_work:
            return
        rounds = max(3, args.rounds)
        write_section("probe", ["## The probe's own cost on a real vLLM 0.33.0 install", ""]
                      + provenance() + ["", "The probe's part of the command above is "
                                        "`python3 benchmarks/probe_cost.py --rounds %d --write`."
                                        % rounds, ""]
                      + probe_cost.measure(rounds))


if __name__ == "__main__":
    main()
