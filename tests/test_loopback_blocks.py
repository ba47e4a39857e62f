"""Loopback blocks (tests/loopback_blocks.py): xdist workers' slices never overlap, a
block is handed to one holder at a time, and never while something listens in it."""

from __future__ import annotations

import socket

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


def test_a_block_is_taken_once_until_given_back(spare_blocks):
    """Over two blocks this run holds for the test (fixed numbers would meet another
    worker's fleet, which listens there)."""
    low, high = sorted(spare_blocks)
    blocks = LoopbackBlocks([low, high])
    first, second = blocks.take(), blocks.take()
    assert {first, second} == {low, high}
    with pytest.raises(RuntimeError, match=r"all 2 loopback blocks of 127\.\d+\.%d-%d\.x"
                       % (low, high)):
        blocks.take()
    blocks.give_back(first)
    assert blocks.take() == first


def test_a_block_where_something_listens_is_passed_over_until_the_listener_is_gone(
        spare_blocks):
    first, second = spare_blocks
    blocks = LoopbackBlocks([first, second])
    held = socket.socket()  # another run's sshd, as far as the blocks can tell
    try:
        held.bind((blocks.address(first, 7), 0))
        held.listen(1)
        assert blocks.take() == second
        with pytest.raises(RuntimeError, match=r"something listens on 127\.\d+\.%d\.7$" % first):
            blocks.take()
    finally:
        held.close()
    assert blocks.take() == first
