"""libddp's learning-rate schedulers against torch.optim.lr_scheduler from the
same wheel: build/tests/lr_schedule_trace prints the rate after construction
and after each of 1,000 steps, with a save and restore of the optimizer's and
scheduler's state_dict (a torch.save file) in the middle. Every rate must
equal PyTorch's uninterrupted run to 1e-12 relative; PyTorch, given the
state libddp saved in the middle, must go on with the same rates; and so
must libddp given the state PyTorch saved (MultiStepLR's Counter included).
Each case also runs over an optimizer with two parameter groups (the second
with its own rate): every group's rate must be PyTorch's."""
import os
import subprocess

import pytest
import torch

TRACE = os.path.join(os.environ.get("DDP_BUILD", "build"), "tests", "lr_schedule_trace")
STEPS = 1000
RESTORE = 437
# The schedules are stepped without optimizer steps (they only compute rates).
pytestmark = pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")

CASES = {
    "step": ("step", {"step_size": 30, "gamma": 0.5}),
    "multistep": ("multistep", {"gamma": 0.5}),
    "exponential": ("exponential", {"gamma": 0.995}),
    "cosine": ("cosine", {"t_max": 300, "eta_min": 0.001}),  # past T_max: the cosine goes back up
    "linear": ("linear", {"start_factor": 0.1, "total_iters": 50}),
    "onecycle": ("onecycle", {"max_lr": 1.0, "total_steps": STEPS}),
    "onecycle_linear_three_phase": ("onecycle", {"max_lr": 0.5, "total_steps": STEPS, "linear": 1, "three_phase": 1}),
    "warmup_then_cosine": ("sequential", {"start_factor": 0.1, "total_iters": 100, "t_max": 900}),
    "plateau": ("plateau", {"factor": 0.5, "patience": 3, "cooldown": 2}),
}


def python_run(kind, kv, adamw):
    p = torch.nn.Parameter(torch.zeros(2))
    groups = [{"params": [p]}]
    if kv.get("groups") == 2:
        groups.append({"params": [torch.nn.Parameter(torch.zeros(3))], "lr": 0.03})
    opt = (torch.optim.AdamW(groups, lr=0.1, weight_decay=0.01) if adamw
           else torch.optim.SGD(groups, lr=0.1, momentum=0.9))
    S = torch.optim.lr_scheduler
    if kind == "step":
        s = S.StepLR(opt, kv["step_size"], kv["gamma"])
    elif kind == "multistep":
        s = S.MultiStepLR(opt, [100, 300, 300, 700], kv["gamma"])
    elif kind == "exponential":
        s = S.ExponentialLR(opt, kv["gamma"])
    elif kind == "cosine":
        s = S.CosineAnnealingLR(opt, kv["t_max"], kv["eta_min"])
    elif kind == "linear":
        s = S.LinearLR(opt, kv["start_factor"], 1.0, kv["total_iters"])
    elif kind == "onecycle":
        s = S.OneCycleLR(opt, kv["max_lr"], total_steps=kv["total_steps"],
                         anneal_strategy="linear" if kv.get("linear") else "cos",
                         three_phase=bool(kv.get("three_phase")))
    elif kind == "sequential":
        a = S.LinearLR(opt, kv["start_factor"], 1.0, kv["total_iters"])
        b = S.CosineAnnealingLR(opt, kv["t_max"])
        s = S.SequentialLR(opt, [a, b], [kv["total_iters"]])
    else:
        s = S.ReduceLROnPlateau(opt, factor=kv["factor"], patience=kv["patience"], cooldown=kv["cooldown"])
    return opt, s


def step(kind, s, k):
    if kind == "plateau":
        s.step(1.0 / (1 + (k % 7)))
    else:
        s.step()


def reference(kind, kv, adamw, resume_from=None, save_to=None):
    opt, s = python_run(kind, kv, adamw)
    lrs = [g["lr"] for g in opt.param_groups]
    for k in range(STEPS):
        if k == RESTORE and save_to:
            torch.save({"optimizer": opt.state_dict(), "scheduler": s.state_dict()}, save_to)
        if k == RESTORE and resume_from:
            saved = torch.load(resume_from, weights_only=True)
            opt, s = python_run(kind, kv, adamw)
            opt.load_state_dict(saved["optimizer"])
            s.load_state_dict(saved["scheduler"])
        step(kind, s, k)
        lrs += [g["lr"] for g in opt.param_groups]
    return lrs


def close(a, b):
    return all(abs(x - y) <= 1e-12 * max(abs(x), abs(y)) for x, y in zip(a, b)) and len(a) == len(b)


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_rates_equal_pytorch_through_a_restore(tmp_path, case, optimizer, groups):
    kind, kv = CASES[case]
    if groups == 2:
        kv = dict(kv, groups=2)
    mid = str(tmp_path / "mid.pt")
    theirs_mid = str(tmp_path / "theirs_mid.pt")
    theirs = reference(kind, kv, optimizer == "adamw", save_to=theirs_mid)

    def trace(env=None):
        out = subprocess.run([TRACE, kind, str(STEPS), str(RESTORE), mid, optimizer] + [f"{k}={v}" for k, v in kv.items()],
                             capture_output=True, text=True, timeout=120, env=dict(os.environ, **(env or {})))
        assert out.returncode == 0, out.stderr
        return [float(line) for line in out.stdout.split()]

    ours = trace()
    bad = [k for k, (x, y) in enumerate(zip(ours, theirs)) if abs(x - y) > 1e-12 * max(abs(x), abs(y))]
    assert len(ours) == (STEPS + 1) * groups and not bad, f"first differing step {bad[:1]}: {[ours[k] for k in bad[:3]]} vs {[theirs[k] for k in bad[:3]]}"
    # PyTorch resumes from the state libddp saved at RESTORE, and libddp
    # from the state PyTorch saved there.
    assert close(reference(kind, kv, optimizer == "adamw", resume_from=mid), theirs)
    assert close(trace({"LR_TRACE_RESUME_FROM": theirs_mid}), theirs)


def test_a_period_past_2_to_the_62_steps_as_pytorch(tmp_path):
    # CosineAnnealingLR tests (e - 1 - T_max) % (2 * T_max): 2 * T_max
    # overflowed int64 here (undefined behaviour, red under UBSan; the
    # rates themselves barely move with so long a period).
    kv = {"t_max": 2**63 - 1, "eta_min": 0.001}
    theirs = reference("cosine", kv, False)
    out = subprocess.run([TRACE, "cosine", str(STEPS), str(RESTORE), str(tmp_path / "mid.pt"), "sgd"] +
                         [f"{k}={v}" for k, v in kv.items()], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert close([float(x) for x in out.stdout.split()], theirs)


@pytest.mark.parametrize("kind,key", [("cosine", "last_epoch"), ("cosine", "_step_count"),
                                      ("plateau", "num_bad_epochs"), ("plateau", "cooldown_counter"),
                                      ("sequential", "last_epoch")])
def test_a_saved_step_count_that_the_next_step_would_overflow_is_refused(tmp_path, kind, key):
    # Python's ints go on past 2^63 - 1; libddp's int64 counters would
    # overflow on the next step, so a state holding one is refused on load.
    kv = dict(CASES["warmup_then_cosine" if kind == "sequential" else kind][1])
    opt, s = python_run(kind, kv, False)
    state = s.state_dict()
    state[key] = 2**63 - 1
    theirs = str(tmp_path / "theirs.pt")
    torch.save({"optimizer": opt.state_dict(), "scheduler": state}, theirs)
    out = subprocess.run([TRACE, kind, "3", "1", str(tmp_path / "mid.pt"), "sgd"] + [f"{k}={v}" for k, v in kv.items()],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ, LR_TRACE_RESUME_FROM=theirs))
    assert out.returncode == 1
    assert f"{key} 9223372036854775807 is out of range" in out.stderr, out.stderr
