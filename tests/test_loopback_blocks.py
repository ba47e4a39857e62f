"""Loopback blocks (tests/loopback_blocks.py): xdist workers' slices never overlap, and a
block is handed to one holder at a time."""

from __future__ import annotations

import pytest

from loopback_blocks import BLOCKS, LoopbackBlocks, worker_slice

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("workers", [1, 2, 3, 7])
def test_worker_slices_are_disjoint_and_inside_the_blocks(workers):
    slices = [set(worker_slice("gw%d" % index, workers)) for index in range(workers)]
    assert all(len(s) == len(BLOCKS) // workers for s in slices)
    assert len(set().union(*slices)) == sum(len(s) for s in slices)
    assert set().union(*slices) <= set(BLOCKS) and 0 not in set().union(*slices)


def test_without_xdist_the_process_has_every_block():
    assert worker_slice(None, 1) == BLOCKS


def test_a_block_is_taken_once_until_given_back():
    blocks = LoopbackBlocks(range(5, 7))
    first, second = blocks.take(), blocks.take()
    assert {first, second} == {5, 6}
    with pytest.raises(RuntimeError, match=r"all 2 loopback blocks of 127\.\d+\.5-6\.x"):
        blocks.take()
    blocks.give_back(first)
    assert blocks.take() == first
