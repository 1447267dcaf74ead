"""Ladder arithmetic against worked examples (docs/spyre-inference.md, section 1)."""

import pytest

from harness.ladders import (
    blocks_ladder,
    chunking,
    default_query_ladder,
    ladder_sum,
    powers_of_two,
    reachable,
    resolve_clamp,
    resolve_topup,
    round_up,
    stick_padded,
)


@pytest.mark.parametrize("n,start,expected", [
    (2048, 64, (64, 128, 256, 512, 1024, 2048)),
    (2048, 192, (256, 512, 1024, 2048)),
    (256, 192, (256,)),
    (11, 1, (1, 2, 4, 8, 11)),
    (32, 4, (4, 8, 16, 32)),
    (3, 4, (3,)),          # start above n gives (n,)
    (0, 1, ()),            # n < 1 gives ()
    (1, 1, (1,)),
    (5, 0, (1, 2, 4, 5)),
])
def test_powers_of_two(n, start, expected):
    assert powers_of_two(n, start) == expected


def test_round_up_is_bisect_with_none_above_top():
    ladder = (2, 3, 6, 11)
    assert [round_up(ladder, x) for x in (1, 2, 3, 4, 6, 7, 11, 12)] == [2, 2, 3, 6, 6, 11, 11, None]


def test_topup_keeps_entries_above_limit_and_appends_below():
    assert resolve_topup((128, 8192), 2048, ())[0] == (128, 8192)
    assert resolve_topup((128, 512), 2048, ())[0] == (128, 512, 2048)
    assert resolve_topup(None, 2048, (1, 2))[0] == (1, 2)


def test_clamp_drops_entries_above_limit_then_appends():
    ladder, notes = resolve_clamp((128, 8192), 2048, ())
    assert ladder == (128, 2048)
    assert any("dropped" in n for n in notes) and any("appended" in n for n in notes)
    assert resolve_clamp((4096, 8192), 2048, ())[0] == (2048,)   # empty after the drop
    assert resolve_clamp((512, 2048), 2048, ())[0] == (512, 2048)


def test_default_query_ladder():
    assert default_query_ladder(2048) == (1, 512, 1024, 1536, 2048)
    assert default_query_ladder(300) == (1, 300)
    assert default_query_ladder(1000) == (1, 512, 1000)


def test_blocks_ladder_and_stick():
    assert blocks_ladder((256, 512, 1024, 2048), 192) == (2, 3, 6, 11)
    assert blocks_ladder((128, 8192), 64) == (2, 128)
    assert [stick_padded(x) for x in (1, 32, 33, 64)] == [32, 32, 64, 64]


@pytest.mark.parametrize("b_seqs,b_blocks,expected", [
    (4, 128, (8, 16)), (4, 4, (4, 1)), (8, 11, (4, 3)), (64, 5, (1, 5))])
def test_chunking_examples(b_seqs, b_blocks, expected):
    assert chunking(b_seqs, b_blocks) == expected


def test_reachable_buckets():
    # num_seqs ladder from 1: batches of 4..32 never reach 1 or 2
    assert reachable((1, 2, 4, 8, 16, 32), 4, 32) == (4, 8, 16, 32)
    # top-up blocks ladder: 1..32 real blocks reach both buckets
    assert reachable((2, 128), 1, 32) == (2, 128)
    assert reachable((2, 32, 64), 1, 32) == (2, 32)


@pytest.mark.parametrize("ladder,positions,expected", [
    ((1, 2, 4, 8, 11), 10, 81),     # review point 1 at bs 192, quick tier: before #810 ...
    ((2, 3, 6, 11), 10, 88),        # ... and after: fewer, larger buckets sum higher (worse)
    ((2, 3, 6, 11), 4, 22),         # as long as the positions: its plain sum
    ((64, 128, 256, 512), 2, 960),  # longer than the positions: every entry still counts
    ((1, 2, 4, 9, 11), 10, 82),     # one entry grown (8 -> 9) raises it
])
def test_a_ladder_summed_over_positions_grows_when_a_bucket_grows(ladder, positions, expected):
    assert ladder_sum(ladder, positions) == expected
