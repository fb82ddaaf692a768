# SPDX-License-Identifier: BSD-2-Clause
"""The agent's always-on step signal, switched from inside the measured
process as `ptbpf daemon` leaves it between windows: build/libptbpf-agent.so
loaded with ctypes, and PTBPF_CMD_OFF with the words " steps" written into
its control block (include/ptbpf_agent.h) the way ptbpf writes commands."""
import ctypes
import os
import time

# struct ptbpf_agent_ctl's words, cmd, seq, ack and owner.
CTL_WORDS, CTL_CMD, CTL_SEQ, CTL_ACK, CTL_OWNER = 56, 24, 16, 184, 28
STEPS_ON = 12  # struct ptbpf_agent_steps's `on`


class StepSignal:
    def __init__(self, build):
        self.agent = ctypes.CDLL(os.path.join(build, "libptbpf-agent.so"))
        self.ctl = ctypes.addressof(ctypes.c_uint8.in_dll(self.agent, "ptbpf_agent_ctl"))
        self.steps = ctypes.addressof(ctypes.c_uint8.in_dll(self.agent, "ptbpf_agent_steps"))

    def command(self, words):
        """PTBPF_CMD_OFF with these words; waits for the ack and returns
        whether the step signal is on."""
        raw = words.encode() + b"\0"
        ctypes.memmove(self.ctl + CTL_WORDS, raw, len(raw))
        ctypes.c_uint32.from_address(self.ctl + CTL_CMD).value = 0
        # This process is its owner (a ptbpf attached before named itself,
        # and the agent switches off once its owner is gone).
        ctypes.c_uint32.from_address(self.ctl + CTL_OWNER).value = os.getpid()
        seq = ctypes.c_uint64.from_address(self.ctl + CTL_SEQ)
        seq.value += 1
        deadline = time.time() + 5
        while ctypes.c_uint64.from_address(self.ctl + CTL_ACK).value != seq.value:
            if time.time() > deadline:
                raise RuntimeError("the agent did not answer its control block")
            time.sleep(0.002)
        return ctypes.c_uint32.from_address(self.steps + STEPS_ON).value == 1

    def on(self):
        if not self.command(" steps"):
            raise RuntimeError("the agent's step signal did not go on")

    def off(self):
        self.command("")
