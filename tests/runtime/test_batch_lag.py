"""The batch lag the runtime counts survives a partition revoked between taking a batch and counting."""

from __future__ import annotations

from aiokafka import TopicPartition

from framework.runtime.binding import _batch_lag


class RevokingConsumer:
    """A stand-in for Faust's consumer (no broker needed): ``highwater`` asserts on a partition
    it no longer holds, as aiokafka's does."""

    def __init__(self, held: dict[TopicPartition, int]) -> None:
        self.held = held

    def highwater(self, tp: TopicPartition) -> int:
        assert tp in self.held, "Partition is not assigned"
        return self.held[tp]


def test_a_partition_revoked_meanwhile_counts_nothing_instead_of_crashing_the_agent() -> None:
    kept, gone = TopicPartition("t", 0), TopicPartition("t", 1)
    consumer = RevokingConsumer({kept: 100})
    assert _batch_lag(consumer, {kept: 89, gone: 5}) == 10
    assert _batch_lag(consumer, {gone: 5}) == 0
