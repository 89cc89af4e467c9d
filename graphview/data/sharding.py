"""``gv.data.Shard(world)``: each rank's slice of every batch, for data-parallel runs (ADR 0025)."""
from graphview.data.pipeline import Transformer
from graphview.data.sample import DataError, MiniBatch


def shard_rows(count, rank, size):
    """``(start, stop)`` of rank ``rank``'s rows among ``count``: contiguous, in rank order, sizes differing
    by at most one (the first ``count % size`` ranks take one more)."""
    base, extra = divmod(count, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def shard_batch(batch, rank, size):
    """Rank ``rank``'s rows of MiniBatch ``batch`` (views of its arrays; lengths sliced alike)."""
    if not isinstance(batch, MiniBatch):
        raise DataError(f"Shard: expected MiniBatches (put Shard after Batch), got a {type(batch).__name__}")
    start, stop = shard_rows(batch.size, rank, size)
    return MiniBatch({k: v[start:stop] for k, v in batch.features.items()},
                     {k: v[start:stop] for k, v in batch.targets.items()},
                     {k: v[start:stop] for k, v in batch.lengths.items()})


class Shard(Transformer):
    """After ``Batch``: each rank keeps its contiguous share of every batch (``world.rank`` of
    ``world.size``, sizes differing by at most one), so the ranks together see each batch once.
    Every rank must read the same batches in the same order (same data, same Shuffle seed).
    ``g.fit`` with ``TrainingConfig(data_parallel=...)`` shards by itself; use Shard for your own loops."""

    def __init__(self, world):
        rank, size = getattr(world, "rank", None), getattr(world, "size", None)
        if not isinstance(size, int) or not isinstance(rank, int) or size < 1 or not 0 <= rank < size:
            raise DataError(f"Shard: expected a world with rank and size (gv.distributed.init()), got {world!r}")
        self.rank, self.size = rank, size

    def apply(self, items, epoch):
        for batch in items:
            yield shard_batch(batch, self.rank, self.size)

    def __repr__(self):
        return f"Shard(rank {self.rank} of {self.size})"
