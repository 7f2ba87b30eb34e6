"""A cell's cgroup: where it goes (cgroup v1 or v2), its limits, its counters, its cleanup after a killed job, the
sandbox that starts every command in it, and the preflight's memory check.

The machine's own cgroups are used where the test needs the kernel (a memory hog killed at the limit, a fork
refused, a killed job's cgroup swept); where it must see a layout this machine does not have (cgroup v2 here is
hybrid), the layout is a folder tree of the same files."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from settingsfactory import config_with, job_settings
from skillbench.base.process import process_stamp, run_managed
from skillbench.execution import cgroups
from skillbench.execution.cgroups import CgroupError, CgroupLimits, LimitEvents, Placement

MIB = 1 << 20
ENV = {"PATH": "/usr/bin:/bin"}


def sandbox_settings(backend: str = "bwrap", **limits):
    return job_settings({"sandbox": {"backend": backend, "limits": limits}}).sandbox


# ---------------------------------------------------------------------------------------------------------
# What a cell is allowed, and where its cgroup goes


def test_a_cells_memory_is_its_processes_and_its_disk_quota_and_zero_switches_a_limit_off():
    settings = sandbox_settings(memory_mb=512, processes=100)
    assert cgroups.cell_limits(settings, disk_mb=256) == CgroupLimits(768 * MIB, 100)
    assert cgroups.cell_limits(sandbox_settings(memory_mb=0, processes=100), 256) == CgroupLimits(None, 100)
    assert cgroups.cell_limits(sandbox_settings(memory_mb=512, processes=0), 0) == CgroupLimits(512 * MIB, None)
    assert cgroups.cell_limits(sandbox_settings(memory_mb=0, processes=0), 256) is None
    assert cgroups.cell_limits(sandbox_settings("none", memory_mb=512), 0) is None  # none contains nothing


def fake_hierarchy(root: Path, controllers: str) -> Path:
    """A cgroup v2 mount at `root`: this job in /job/leaf, its parent /job offering `controllers`."""
    leaf = root / "job" / "leaf"
    leaf.mkdir(parents=True)
    (root / "job" / "cgroup.controllers").write_text(controllers + "\n")
    (root / "job" / "cgroup.subtree_control").write_text("\n")
    return leaf


def test_cgroup_v2_goes_beside_the_jobs_own_under_its_parent(tmp_path):
    fake_hierarchy(tmp_path / "unified", "cpu memory pids")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        f"41 31 0:38 / {tmp_path}/unified rw,relatime - cgroup2 cgroup2 rw\n"
        "35 31 0:32 / /nowhere/memory rw,relatime - cgroup cgroup rw,memory\n"
    )
    own = tmp_path / "cgroup"
    own.write_text("4:memory:/elsewhere\n0::/job/leaf\n")
    assert cgroups.placement(mountinfo, own) == Placement(2, (tmp_path / "unified" / "job",))


def test_a_hybrid_host_uses_cgroup_v1_under_the_jobs_own_in_each_hierarchy(tmp_path):
    # The unified hierarchy has no memory or pids controller here: they are on v1 hierarchies of their own.
    fake_hierarchy(tmp_path / "unified", "hugetlb")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        f"41 31 0:38 / {tmp_path}/unified rw - cgroup2 cgroup2 rw\n"
        f"35 31 0:32 / {tmp_path}/memory rw - cgroup cgroup rw,memory\n"
        f"39 31 0:36 / {tmp_path}/pids rw - cgroup cgroup rw,pids\n"
        f"40 31 0:33 / {tmp_path}/cpu rw - cgroup cgroup rw,cpu,cpuacct\n"
    )
    own = tmp_path / "cgroup"
    own.write_text("8:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/job/leaf\n")
    assert cgroups.placement(mountinfo, own) == Placement(1, (tmp_path / "memory/process_api/abc", tmp_path / "pids"))


def test_a_machine_without_the_controllers_is_refused_with_the_fix(tmp_path):
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"41 31 0:38 / {tmp_path}/unified rw - cgroup2 cgroup2 rw\n")
    fake_hierarchy(tmp_path / "unified", "cpu")
    own = tmp_path / "cgroup"
    own.write_text("0::/job/leaf\n")
    with pytest.raises(CgroupError) as refused:
        cgroups.placement(mountinfo, own)
    message = str(refused.value)
    assert "memory controller" in message and "sandbox.limits.memory_mb" in message
    assert "sandbox.backend: none" in message and "delegated" in message


def test_a_v2_parent_is_made_to_hand_both_controllers_down_and_the_limits_are_written(tmp_path):
    parent = tmp_path / "job"
    parent.mkdir()
    (parent / "cgroup.subtree_control").write_text("cpu\n")
    cgroup = cgroups.create(Placement(2, (parent,)), CgroupLimits(300 * MIB, 64))
    # A plain folder has no kernel behind it: what the harness wrote is what the files hold.
    assert (parent / "cgroup.subtree_control").read_text() == "+memory +pids"
    (folder,) = cgroup.folders
    assert folder.parent == parent and folder.name.startswith(f"{cgroups.PREFIX}{process_stamp()}-")
    assert (folder / "memory.max").read_text() == str(300 * MIB) and (folder / "pids.max").read_text() == "64"
    assert cgroup.join_argv()[:5] == ["/bin/sh", "-c", cgroups.JOIN_SCRIPT, "sh", "1"]
    assert cgroup.join_argv()[5:] == [str(folder / "cgroup.procs")]
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 3\noom_group_kill 0\n")
    (folder / "pids.events").write_text("max 5\n")
    assert cgroup.events() == LimitEvents(oom_kills=3, pids_refused=5, own_limit_ooms=2)


def test_a_limit_hit_names_its_kind_and_the_keys_that_set_it():
    limits = CgroupLimits(768 * MIB, 100)
    kind, detail = cgroups.limit_hit(LimitEvents(oom_kills=1, pids_refused=3, own_limit_ooms=1), limits) or ("", "")
    assert kind == "memory-limit-exceeded" and "768 MiB" in detail and "sandbox.limits.memory_mb" in detail
    kind, detail = cgroups.limit_hit(LimitEvents(pids_refused=3), limits) or ("", "")
    assert kind == "process-limit-exceeded" and "100 processes" in detail and "refused 3" in detail
    assert cgroups.limit_hit(LimitEvents(), limits) is None
    # A kill the machine's memory (or an enclosing cgroup's limit) made, the cell's own limit never reached: not the
    # cell's doing, so no counted outcome (the session's failure stays the harness's).
    assert cgroups.limit_hit(LimitEvents(oom_kills=1), limits) is None
    assert LimitEvents(3, 4, 5).since(LimitEvents(1, 4, 2)) == LimitEvents(2, 0, 3)


def test_the_cells_meminfo_caps_every_amount_at_its_limit():
    host = (
        "MemTotal:       24683876 kB\nMemFree:        18441900 kB\nBuffers:          101116 kB\n"
        "HugePages_Total:       0\n"
    )
    shown = cgroups.synthetic_meminfo(host, 512 * MIB)
    values = {line.split(":")[0]: line.split()[1:] for line in shown.splitlines()}
    assert values == {
        "MemTotal": ["524288", "kB"],
        "MemFree": ["524288", "kB"],
        "Buffers": ["101116", "kB"],
        "HugePages_Total": ["0"],
    }


# ---------------------------------------------------------------------------------------------------------
# The kernel, on this machine


@pytest.fixture
def cell() -> cgroups.CellCgroup:
    where = cgroups.placement()
    with cgroups.cell_cgroup(CgroupLimits(128 * MIB, 40), where) as cgroup:
        assert cgroup is not None
        yield cgroup
    assert not any(folder.exists() for folder in cgroup.folders)  # removed with the cell


def test_a_memory_hog_is_killed_at_its_cells_limit_and_counted_while_a_neighbour_goes_on(cell):
    with cgroups.cell_cgroup(CgroupLimits(128 * MIB, 40)) as neighbour:
        assert neighbour is not None
        calm = subprocess.Popen([*neighbour.join_argv(), sys.executable, "-c", "import time; time.sleep(3)"], env=ENV)
        hog = run_managed(
            [*cell.join_argv(), sys.executable, "-c", "x = bytearray(400 << 20); print('allocated')"],
            env=ENV,
            timeout=60,
        )
        assert hog.state == "killed" and "allocated" not in hog.stdout_tail
        hits = cell.events()
        assert hits.oom_kills == 1 and hits.own_limit_ooms >= 1 and neighbour.events() == LimitEvents()
        assert calm.wait(60) == 0


def test_a_fork_past_the_process_limit_is_refused_and_counted(cell):
    code = "import os\nfor _ in range(100):\n    pid = os.fork()\n    if pid == 0:\n        os.system('sleep 5')\n"
    result = run_managed([*cell.join_argv(), sys.executable, "-c", code], env=ENV, timeout=60)
    assert "Resource temporarily unavailable" in result.stderr_tail
    assert cell.events().pids_refused >= 1 and cell.events().oom_kills == 0


def test_closing_a_cells_cgroup_kills_what_still_runs_in_it():
    with cgroups.cell_cgroup(CgroupLimits(128 * MIB, 40)) as cgroup:
        assert cgroup is not None
        # Started in its own session, so nothing but the cgroup holds it.
        left = subprocess.Popen([*cgroup.join_argv(), "setsid", "sleep", "600"], env=ENV)
        deadline = time.monotonic() + 30
        while not cgroup.processes() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert cgroup.processes()
    assert left.wait(30) != 0 and not any(folder.exists() for folder in cgroup.folders)


def test_the_cgroup_a_killed_job_left_is_removed_by_the_next_cell():
    job = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys\n"
            "from skillbench.execution import cgroups\n"
            "cgroup = cgroups.create(cgroups.placement(), cgroups.CgroupLimits(64 << 20, 20))\n"
            "print(*cgroup.folders, flush=True)\n"
            "os.execvp('sh', [*cgroup.join_argv(), 'sleep', '600'])\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**ENV, "PYTHONPATH": str(Path(cgroups.__file__).resolve().parents[2])},
    )
    assert job.stdout is not None
    folders = [Path(folder) for folder in job.stdout.readline().split()]
    assert folders and all(folder.is_dir() for folder in folders)
    # The job itself lives on in its cgroup (it exec'd into it): the next cell leaves a live job's cgroup alone.
    assert cgroups.sweep_orphaned(cgroups.placement()) == []
    job.kill()
    job.wait(30)
    with cgroups.cell_cgroup(CgroupLimits(64 * MIB, 20)):
        assert not any(folder.exists() for folder in folders)


def test_the_preflight_makes_joins_and_removes_a_probe_cgroup():
    cgroups.preflight(CgroupLimits(64 * MIB, 20))
    cgroups.preflight(None)  # no limits, no cgroup, nothing to check
    where = cgroups.placement()
    leftovers = [
        entry for parent in where.parents for entry in os.listdir(parent) if entry.startswith("skillbench-probe-")
    ]
    assert leftovers == []


# ---------------------------------------------------------------------------------------------------------
# The sandbox in its cell's cgroup


def test_every_command_of_a_sandbox_with_a_cgroup_joins_it_and_sees_the_cells_memory(tmp_path):
    from skillbench.execution.sandbox import Sandbox, SandboxLimits

    root = Path(os.path.realpath("/tmp")) / f"skillbench-cgroup-test-{os.getpid()}"
    (root / "workspace").mkdir(parents=True)
    limits = replace(SandboxLimits.default(), processes=64, memory_mb=256, file_mb=1)
    try:
        with cgroups.cell_cgroup(CgroupLimits(256 * MIB, 64)) as cgroup:
            box = Sandbox("bwrap", root / "workspace", root, limits=limits, cgroup=cgroup)
            try:
                command = box.command(["true"])
                assert command[: len(cgroup.join_argv())] == cgroup.join_argv()
                # The cgroup bounds memory and processes; per process only the file size is left.
                assert not [arg for arg in command if arg.startswith(("--as=", "--nproc="))]
                assert "--fsize=1048576" in command
                # Setup, verify and the oracle read the cell's memory; so do the agent's commands, in the sandbox the
                # shell prefix nests, and what they nest in turn (the git wrapper's): each level mounts its own /proc.
                probe = (
                    "head -n 1 /proc/meminfo; cmp -s /proc/1/cmdline /run/skillbench-proc/1/cmdline && echo own-proc"
                )
                nested = f"{probe}; /opt/claude/git --version"
                shown = box.run(["/bin/sh", "-c", f"{probe}; /opt/claude/shell-prefix '{nested}'"], timeout=60)
                assert shown.ok, shown.stderr_tail
                lines = shown.stdout_tail.splitlines()
                memory = ["MemTotal:", str(256 * 1024), "kB"]
                assert [line.split() for line in lines[0:3:2]] == [memory, memory], lines
                assert lines[1] == lines[3] == "own-proc" and lines[4].startswith("git version"), lines
            finally:
                box.close()
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=True)


def test_a_task_setup_that_runs_into_the_cells_limits_is_the_suites_infra_error_naming_the_key():
    """The task's own step, before any agent: a setup past the cell's memory says which key to raise (excluded and
    retried like every harness failure), never the agent's counted outcome."""
    from types import SimpleNamespace

    from skillbench.execution import cells
    from skillbench.execution.failures import InfraError
    from skillbench.execution.sandbox import Sandbox, SandboxLimits

    root = Path(os.path.realpath("/tmp")) / f"skillbench-cgroup-setup-{os.getpid()}"
    (root / "workspace").mkdir(parents=True)
    limits = replace(SandboxLimits.default(), processes=64, memory_mb=128)
    try:
        with cgroups.cell_cgroup(CgroupLimits(128 * MIB, 64)) as cgroup:
            box = Sandbox("bwrap", root / "workspace", root, limits=limits, cgroup=cgroup)
            work = SimpleNamespace(
                sandbox=box,
                cell=SimpleNamespace(task={"setup": "python3 -c 'x = bytearray(400 << 20)'"}),
                settings=SimpleNamespace(agent=SimpleNamespace(setup_timeout_s=120)),
                context=SimpleNamespace(timings={}),
                disk_mb=0,
                private_root=root,
            )
            try:
                with pytest.raises(InfraError) as caught:
                    cells._run_setup(work)
            finally:
                box.close()
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=True)
    assert str(caught.value).startswith("task setup ran into the cell's limits (the kernel killed 1 process(es)")
    assert "sandbox.limits.memory_mb" in str(caught.value) and "raise them in sandbox.limits" in str(caught.value)


# ---------------------------------------------------------------------------------------------------------
# The preflight's memory check


def test_a_config_whose_sessions_do_not_fit_the_machines_memory_is_refused_naming_both_keys():
    from skillbench.preflight import memory_fit_problem

    defaults = config_with()
    assert memory_fit_problem(defaults, 2, 15800) is None  # the defaults fit a 16 GB machine (its MemTotal)
    problem = memory_fit_problem(defaults, 3, 15800) or ""
    assert "agent_sessions" in problem and "sandbox.limits.memory_mb 3072" in problem and "21504 MiB" in problem
    assert "sandbox.limits.disk_mb 4096" in problem and "15800 MiB" in problem
    assert memory_fit_problem(config_with({"sandbox": {"backend": "none"}}), 30, 1000) is None
    unlimited = config_with({"sandbox": {"limits": {"memory_mb": 0, "processes": 10}}})
    assert memory_fit_problem(unlimited, 30, 1000) is None


def test_the_machines_memory_is_its_own_cgroups_limit_when_that_is_lower(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683876 kB\n")
    parent = tmp_path / "job"
    parent.mkdir()
    (parent / "memory.max").write_text(f"{8192 * MIB}\n")
    assert cgroups.host_memory_mb(meminfo, Placement(2, (parent,))) == 8192
    (parent / "memory.max").write_text("max\n")
    assert cgroups.host_memory_mb(meminfo, Placement(2, (parent,))) == 24683876 // 1024
