# SPDX-License-Identifier: BSD-2-Clause
"""CUPTI itself (tests/progs/cupti_race.cu), the facts the agent's use of
it rests on (issue 43): what switching callbacks on and off from one
thread does to another thread that is inside CUDA calls meanwhile. A
thread left inside a call whose callback was switched off keeps one
correlation id for its later API records (the job's own profiler then
raises on the duplicate flow starts); subscribing, unsubscribing and the
activity kinds do not harm it."""
import glob
import os
import subprocess

from conftest import BUILD, PYTHON

RACE = os.path.join(BUILD, "cupti_race")


def race(variant, seeds, toggles=100):
    """cupti_race's lines for each seed: ok, STUCK, or how it died."""
    libs = glob.glob(os.path.join(os.path.dirname(os.path.dirname(PYTHON)), "lib", "python3*",
                                  "site-packages", "nvidia", "cu13", "lib"))
    assert libs, "no nvidia/cu13/lib in the environment of %s" % PYTHON
    env = dict(os.environ, LD_LIBRARY_PATH=libs[0])
    lines = []
    for seed in seeds:
        r = subprocess.run([RACE, variant, str(toggles), str(seed)], env=env,
                           capture_output=True, text=True, timeout=120)
        lines.append(r.stdout.strip() if r.returncode == 0 else
                     "%s seed %d: died (%d): %s" % (variant, seed, r.returncode, r.stderr[-300:]))
    return lines


def test_subscribing_and_unsubscribing_leave_calls_whole():
    """Measured first on the H200 (2026-12-02): 0 of 10 processes of 200
    subscriptions each."""
    lines = race("A", range(1, 6))
    assert all(": ok:" in line for line in lines), lines


def test_activity_kinds_switched_leave_calls_whole():
    lines = race("B", range(1, 6))
    assert all(": ok:" in line for line in lines), lines


def test_callbacks_switched_on_one_by_one_leave_calls_whole():
    """The agent's way (user/agent/cupti_api.c): every runtime call's
    callback but six frequent ones, each switched on, none off."""
    lines = race("H", range(1, 9))
    assert all(": ok:" in line for line in lines), lines


def test_callbacks_switched_off_on_a_live_subscription_break_calls():
    """The way the agent once subscribed (the runtime domain on, then
    cudaGetDevice and five others off), and switching a domain on and off
    on a live subscription (10 of 10 processes broken on the H200,
    2026-12-02: 8 with no runtime records at all afterwards, 2 died): a
    fact about CUPTI that ptbpf's agent must keep away from."""
    for variant in ("G", "C"):
        lines = race(variant, range(1, 9))
        assert any(": ok:" not in line for line in lines), (variant, lines)
