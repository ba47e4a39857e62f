"""Loopback address blocks for the tests: 127.NET.B.0/24, one third octet B per fleet or
listener. FLEETCHECK_LOOPBACK_NET (the second octet) keeps runs on one machine apart; each
pytest-xdist worker owns its own slice of the 254 blocks, and within a process a block
serves one fleet at a time, so no two live sshd hosts ever ask for the same address. A block
where something already listens (another run's fleet, a `fleetcheck demo --keep`) is passed
over: its sshd would answer for ours."""

from __future__ import annotations

import os
from typing import Sequence

from fleetcheck.lab.testhosts import LOOPBACK_NET, listening_addresses

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

    def __init__(self, blocks: Sequence[int]):
        self.blocks = blocks
        self.free = list(blocks)

    def take(self) -> int:
        """The first free block where nothing listens; one where something does stays
        free, for when its listener is gone."""
        busy = busy_blocks()
        for block in self.free:
            if block not in busy:
                self.free.remove(block)
                return block
        span = "127.%d.%d-%d.x" % (LOOPBACK_NET, self.blocks[0], self.blocks[-1])
        if not self.free:
            raise RuntimeError("all %d loopback blocks of %s are in use"
                               % (len(self.blocks), span))
        raise RuntimeError("every free loopback block of %s has a listener that is not this "
                           "run's: something listens on %s" % (span, ", ".join(sorted(
                               address for address in listening_addresses()
                               if block_of(address) in self.free))))

    def give_back(self, block: int) -> None:
        """Last in the queue: a block just freed is the last one taken again."""
        self.free.append(block)

    def address(self, block: int, index: int = 1) -> str:
        return "127.%d.%d.%d" % (LOOPBACK_NET, block, index)


def block_of(address: str) -> int | None:
    """The block of a 127.NET.B.x address, None for any other address."""
    octets = address.split(".")
    if len(octets) == 4 and octets[0] == "127" and octets[1] == str(LOOPBACK_NET):
        return int(octets[2])
    return None


def busy_blocks() -> set[int]:
    """The blocks holding an address where something listens, on any port."""
    return {block_of(address) for address in listening_addresses()} - {None}


def this_process() -> LoopbackBlocks:
    """The blocks of this test process: its xdist worker's slice, or all of them."""
    return LoopbackBlocks(worker_slice(os.environ.get("PYTEST_XDIST_WORKER"),
                                       int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
