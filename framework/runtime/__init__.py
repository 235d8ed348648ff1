"""The keyed agent runtime: ordered per key, at least once, parallel across keys.

Its invariants, which every change here must keep (each has tests):

1. **Finished** means: the event was parsed, mapped, and every sink call
   returned (the store write is durable, the change feed record is on the
   broker, the delivery ack is written), or the event was parked and the
   dead-letter WAL fsynced it. Nothing else finishes an event.
2. **Acks in offset order.** An offset is acknowledged only when it and every
   earlier offset of its partition are finished (``offsets.OffsetTracker``);
   Faust commits acknowledged offsets (every second, ``framework.worker.faust_app``), so a
   commit never passes unfinished work. A restart redelivers from the commit.
3. **Sinks in declared order**, each call bounded by ``sink_timeout``: the
   store, then the change feed of the projections reading what was written,
   then the delivery-ledger ack. A later sink never runs before an earlier
   one succeeded for that event.
4. **Order scope.** Events with the same ``relation_key`` (default: the
   ordering key) *within one partition* are never reordered against a
   failure: in the per-key path they run one at a time in offset order;
   in the batch path (``batch.py``, used when every sink of an agent writes
   batches) a micro-batch's events are merged and written together, which
   stores exactly what one-by-one writes would, and a key with anything
   waiting in the per-key path never joins a batch. Across partitions there
   is no order: key your topics by the entity.
5. **Failures.** Only a sink's I/O failure is transient (``errors.is_transient``).
   It blocks only its relation key (later events of that key are skipped,
   i.e. wait) and is retried after a back-off that grows with the sink's
   recent failure ratio; a sink that looks down pauses every partition and
   parks nothing, and a failing event parks only after other keys got through
   since its first failure. Anything else (parse, map, a sink's refusal) is a
   bad message: it is parked, then its key moves on.
6. **Bounded memory.** A partition with more than ``max_pending_per_partition``
   received-but-unacknowledged events is paused (in aiokafka, so no fetched
   record is skipped) and resumed at half of it.
7. **Revocation** drops the revoked partitions' unfinished work without
   acknowledging it: its new owner gets it from the last commit. Records of a
   revoked partition or an older consumer generation that reach the runtime
   late are dropped, never tracked nor acknowledged; an assigned partition
   starts a fresh tracker.
8. **Bugs crash.** An error escaping the per-key handling crashes the worker
   (``mode.CrashingSupervisor``), so the events are redelivered rather than
   silently dropped.
"""
