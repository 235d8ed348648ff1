"""A convergence check never passes vacuously (issue 22, case 3): a message parked at ``route``,
an event still waiting for a lookup entry, or a history that wrote no row fails
``assert_converges`` and ``check_convergence`` unless the test allows it, with the kit's
apps, the activity platform and the support desk."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from examples.activity_platform.generator import generate_history as activity_history
from examples.support_desk.app import app as support_desk
from examples.support_desk.generator import generate_history as support_history
from framework.testing import Driver, assert_converges, check_convergence, make_event, snapshot, vacuity
from tests.agents.replay import app as activity_platform
from tests.agents.replay import in_order
from tests.examples.support_desk.test_mail import reply
from tests.state.join_app import child, join_app, parent_set
from tests.testing.apps import shop
from tests.testing.directory_app import app as directory
from tests.testing.directory_app import owner_set

STRAY = make_event("item.painted", {"item": "a"}, key="a", version=5)
ITEM = make_event("item.set", {"item": "a", "name": "Lamp"}, key="a", version=7)


def test_a_message_parked_at_route_fails_the_check_unless_allowed() -> None:
    with pytest.raises(
        AssertionError, match=r"in-order pass exercised less .*\n  parked at route: item.painted"
    ):
        assert_converges(shop(), [ITEM, STRAY], [STRAY, ITEM])
    delivered = assert_converges(shop(), [ITEM, STRAY], [STRAY, ITEM], allow_unrouted=True)
    assert {stage for _, stage, _, _ in delivered.parked} == {"route"}


def test_a_history_that_writes_no_row_fails_unless_allowed() -> None:
    with pytest.raises(AssertionError, match="no table holds a row"):
        assert_converges(shop(), [], [])
    entries = [owner_set("c1", "A", "alpha", 10), owner_set("c1", "B", "beta", 20)]  # entries only
    with pytest.raises(AssertionError, match="no table holds a row"):
        assert_converges(directory, entries, [*entries, entries[0]])
    assert assert_converges(directory, entries, [*entries, entries[0]], allow_empty=True).rows == 0


def test_an_event_still_waiting_for_its_entry_fails_the_check_unless_allowed() -> None:
    history = [parent_set("c1", "A", "alpha", 10), child("m1", "c1", "x", 20), child("m2", "c2", "y", 30)]
    with pytest.raises(AssertionError, match=r"children c-m2 still waits for lookup parent\['c2'\]"):
        assert_converges(join_app(), history, list(reversed(history)))
    delivered = assert_converges(join_app(), history, list(reversed(history)), allow_pending=True)
    assert delivered.pending == {("children", "c-m2", "parent", "c2")}
    assert delivered.tables["msg"]  # m1 was joined


def test_check_convergence_fails_when_no_example_writes_a_row() -> None:
    entries = st.lists(st.sampled_from(["A", "B"]), max_size=3).map(
        lambda owners: [owner_set("c1", o, "l", n + 1) for n, o in enumerate(owners)]
    )
    with pytest.raises(AssertionError, match="no history of the 20 examples wrote a row"):
        check_convergence(directory, entries, max_examples=20)
    check_convergence(directory, entries, max_examples=20, allow_empty=True)


def test_check_convergence_fails_on_an_unrouted_message_in_any_example() -> None:
    histories = st.lists(st.sampled_from([ITEM, STRAY]), min_size=1, max_size=3)
    with pytest.raises(AssertionError, match="parked at route"):
        check_convergence(shop(), histories, max_examples=30)
    check_convergence(shop(), histories, max_examples=30, allow_unrouted=True)


def test_vacuity_lists_each_reason_and_nothing_for_a_full_run() -> None:
    with Driver(join_app()) as d:
        d.send([child("m1", "c1", "x", 20), STRAY])
        found = vacuity(snapshot(d))
    assert found == [
        "parked at route: item.painted@5:"
        + STRAY.event_id.split(":")[-1]
        + ": type: no agent of join-test declares event type 'item.painted'",
        "children c-m1 still waits for lookup parent['c1']",
        "no table holds a row",
    ]


# -- the two example apps --------------------------------------------------------------------------
def test_the_activity_platform_check_fails_on_an_event_no_agent_takes() -> None:
    history = in_order(activity_history(7, 12, n_orgs=1))
    stray = make_event("meeting.teleported", {"org_id": "o1"}, key="o1:x", version=50)
    assert_converges(activity_platform, history, list(reversed(history)))
    with pytest.raises(AssertionError, match="parked at route: meeting.teleported"):
        assert_converges(activity_platform, [*history, stray], [stray, *history])
    assert_converges(activity_platform, [*history, stray], [stray, *history], allow_unrouted=True)


def test_the_support_desk_check_fails_on_a_reply_whose_ticket_never_comes() -> None:
    history = list(support_history(3, 1).events)
    lost = reply("m-lost", 900, "thread-nobody")
    assert_converges(support_desk, history, list(reversed(history)))
    with pytest.raises(
        AssertionError, match=r"mail r-m-lost still waits for lookup conversations\['thread-nobody'\]"
    ):
        assert_converges(support_desk, [*history, lost], [lost, *history])
    delivered = assert_converges(support_desk, [*history, lost], [lost, *history], allow_pending=True)
    assert delivered.pending == {("mail", "r-m-lost", "conversations", "thread-nobody")}
