"""The dataflow's values (probe/trace/values.py): kinds stay apart in a value, and the
joins and conversions the interpreter relies on hold."""

from __future__ import annotations

import pytest

from fleetcheck.probe.trace.values import (EMPTY, NONINT, Deferred, Elem, Ids, Int, Items,
                                              Keyed, Lost, Source, Unknown, as_collection,
                                              as_elements, carries_ids, flat, join, keyed,
                                              with_step)

pytestmark = pytest.mark.unit

STEP = ("vllm/a.py", 3, "read", "ids = cfg['target_layer_ids']")
LATER = ("vllm/a.py", 4, "+1", "return [i + 1 for i in ids]")


def test_kinds_with_the_same_fields_are_different_atoms():
    value = frozenset([Ids(0, (STEP,)), Elem(0, (STEP,))])
    assert len(value) == 2
    assert Ids(0, (STEP,)) != Elem(0, (STEP,))
    assert Source("drops", STEP) != Unknown("drops", STEP)


def test_atoms_are_frozen():
    atom = Ids(0, (STEP,))
    with pytest.raises(AttributeError):
        atom.offset = 1  # type: ignore[misc]


def test_a_collection_of_elements_is_ids_and_holds_no_int():
    value = frozenset([Elem(1, (STEP,)), Int(2, None), NONINT])
    assert as_collection(value) == frozenset([Ids(1, (STEP,))])
    assert as_elements(frozenset([Ids(1, (STEP,))])) == frozenset([Elem(1, (STEP,))])


def test_iterating_a_tuple_yields_its_items():
    items = Items((frozenset([Ids(0, (STEP,))]), frozenset([Int(1, None)])))
    assert as_elements(frozenset([items])) == frozenset([Ids(0, (STEP,)), Int(1, None)])


def test_an_int_on_one_path_only_is_not_a_constant():
    assert NONINT in join([frozenset([Int(1, None)]), EMPTY])
    assert NONINT not in join([frozenset([Int(1, None)]), frozenset([Int(2, None)])])


def test_ids_inside_tuples_and_dicts_are_found_and_opened():
    inner = frozenset([Ids(0, (STEP,))])
    nested = frozenset([keyed([("layers", frozenset([Items((inner,))]))])])
    assert carries_ids(nested)
    assert flat(nested) == inner
    assert not carries_ids(frozenset([Source("drops", STEP)]))


def test_later_keys_replace_earlier_ones_in_a_dict():
    first, second = frozenset([Int(1, None)]), frozenset([Int(2, None)])
    assert keyed([("b", first), ("a", first), ("b", second)]) == \
        Keyed((("a", first), ("b", second)))


def test_a_step_goes_on_the_trail_of_ids_only():
    assert with_step(Ids(1, (STEP,)), LATER) == Ids(1, (STEP, LATER))
    assert with_step(Lost(0, (STEP,), "why"), LATER) == Lost(0, (STEP, LATER), "why")
    assert with_step(Source("drops", STEP), LATER) == Source("drops", STEP)


def test_a_deferred_value_keeps_the_elements_taken_from_it():
    deferred = Deferred("f() could not be followed", STEP, None)
    assert deferred.element(1).element(0).projection == (1, 0)
    assert deferred.unknown() == Unknown("f() could not be followed", STEP)
