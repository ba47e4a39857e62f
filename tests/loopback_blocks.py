"""Loopback address blocks for the tests: 127.NET.B.0/24, one third octet B per fleet or
listener. FLEETCHECK_LOOPBACK_NET (the second octet) keeps runs on one machine apart; each
pytest-xdist worker owns its own slice of the 254 blocks, and within a process a block
serves one fleet at a time, so no two live sshd hosts ever ask for the same address."""

from __future__ import annotations

import os

from fleetcheck.lab.testhosts import LOOPBACK_NET

BLOCKS = range(1, 255)  # 127.NET.0.x holds 127.0.0.1 when NET is 0


def worker_slice(worker: str | None, workers: int) -> range:
    """Every block without xdist; worker "gwK" of N gets the K-th of N equal slices."""
    workers = max(workers, 1)
    index = int(worker[2:]) % workers if worker else 0
    size = len(BLOCKS) // workers
    start = BLOCKS.start + index * size
    return range(start, start + size)


class LoopbackBlocks:
    """The blocks of one slice, each handed to one holder until it is given back."""

    def __init__(self, blocks: range):
        self.blocks = blocks
        self.free = list(blocks)

    def take(self) -> int:
        if not self.free:
            raise RuntimeError("all %d loopback blocks of 127.%d.%d-%d.x are in use"
                               % (len(self.blocks), LOOPBACK_NET, self.blocks[0],
                                  self.blocks[-1]))
        return self.free.pop(0)

    def give_back(self, block: int) -> None:
        """Last in the queue: a block just freed is the last one taken again."""
        self.free.append(block)

    def address(self, block: int, index: int = 1) -> str:
        return "127.%d.%d.%d" % (LOOPBACK_NET, block, index)


def this_process() -> LoopbackBlocks:
    """The blocks of this test process: its xdist worker's slice, or all of them."""
    return LoopbackBlocks(worker_slice(os.environ.get("PYTEST_XDIST_WORKER"),
                                       int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
