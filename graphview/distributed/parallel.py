"""Synchronous data-parallel training (seed 004, BigDL; ADR 0025).

``TrainingConfig(..., data_parallel=gv.distributed.DataParallel(world))`` makes ``g.fit`` train on every
rank at once: each rank reads the same global batches, keeps its contiguous share of the rows, computes
the loss and gradients of its share, and the ranks combine them so that every step is the step one
process would take on the whole batch:

* the local gradients (of a per-example mean loss) are weighted by the share's fraction of the batch,
  packed into one contiguous buffer per dtype and summed in place by all-reduce: the global mean, exact
  for uneven shares. The buffer is laid out in the order the backward pass computes the gradients and
  cut into segments of about ``bucket_bytes``; each segment's all-reduce starts as soon as its last
  gradient is packed, while the backward pass goes on (in segment order, the same on every rank);
* with ``sharded_update=True`` (BigDL's parameter sharding) the buffer is reduce-scattered instead: each
  rank updates only its chunk of the parameters, keeping updater state (momentum, Adam's moments) for
  that chunk alone, 1/N of the memory, and the updated chunks are all-gathered into every rank's
  parameters;
* state that training steps update (batch norm's running statistics) is averaged over the ranks;
* the variables are broadcast from rank 0 when training starts, so every rank starts, and stays, equal;
  ``check_weights=True`` compares a hash of every rank's variables after each step and fails loudly.
"""
import hashlib

import numpy as np

from graphview.data.sharding import shard_batch, shard_rows
from graphview.distributed.comm import DistributedError, checked_timeout, init
from graphview.errors import GraphviewError
from graphview.variable import Kind

BUCKET_BYTES = 256 * 1024       # segment size of the gradient all-reduce (see DataParallel)
WORLD_METHODS = ("allreduce_", "start_allreduce_", "progress_", "wait_", "reduce_scatter_", "allgather_",
                 "broadcast_", "allgather_object")


class DataParallel:
    """How ``fit`` trains across the ranks of ``world`` (default: ``gv.distributed.init()``).

    ``loss_reduction`` says what the loss is over a batch: "mean" (the default; the losses of graphview
    average over the batch) weights each rank's gradients by its share of the rows, "sum" adds them.
    ``timeout`` (seconds) bounds every collective (default: the world's, 300). ``bucket_bytes`` is the
    size of the segments whose all-reduce starts during the backward pass (PyTorch DDP's
    ``bucket_cap_mb``): smaller starts earlier, at a latency per segment."""

    def __init__(self, world=None, sharded_update=False, timeout=None, check_weights=False, loss_reduction="mean",
                 bucket_bytes=BUCKET_BYTES):
        self.world = world if world is not None else init()
        missing = [name for name in WORLD_METHODS if not hasattr(self.world, name)]
        if missing:
            raise DistributedError(f"DataParallel: expected a world from gv.distributed.init(), got {world!r} "
                                   f"(it has no {', '.join(missing)})")
        if timeout is not None:
            self.world.timeout = checked_timeout(timeout)
        for label, flag in (("sharded_update", sharded_update), ("check_weights", check_weights)):
            if not isinstance(flag, (bool, np.bool_)):
                raise DistributedError(f"DataParallel: {label} must be True or False, not {flag!r}")
        if loss_reduction not in ("mean", "sum"):
            raise DistributedError(f"DataParallel: loss_reduction must be 'mean' or 'sum', not {loss_reduction!r}")
        self.sharded_update, self.check_weights = bool(sharded_update), bool(check_weights)
        if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, (int, np.integer)) or bucket_bytes < 1:
            raise DistributedError(f"DataParallel: bucket_bytes must be an int >= 1, not {bucket_bytes!r}")
        self.loss_reduction = loss_reduction
        self.bucket_bytes = int(bucket_bytes)
        self.layout = None
        self.broken = None                  # why this world cannot train on (a step failed mid-way)
        self.chunk_state = {}
        self.watch_iterations = True        # fit sets it: whether rank 0's listeners act within an epoch

    @property
    def rank(self):
        return self.world.rank

    @property
    def size(self):
        return self.world.size

    # --- start -------------------------------------------------------------------------------------

    def start(self, graph, names, updater):
        """Broadcast every VARIABLE from rank 0, lay out the gradient buffers of ``names`` (in the order
        the backward pass computes them, as fit passes them), and with the sharded update take this
        rank's chunk of any updater state already there (a resumed run)."""
        if self.loss_reduction == "mean":
            _refuse_means_over_entries(graph)
        for node in graph.nodes():
            if node.kind is Kind.VARIABLE:
                self.world.broadcast_(graph.stored(node.name))
        self.layout = Layout(graph, [n for n in names if graph.is_trainable(n)], self.size, self.bucket_bytes)
        self.layout.place(self.rank)
        self.chunk_state = {}
        if self.sharded_update and updater.state:
            self.scatter_state(updater)

    def scatter_state(self, updater):
        """Keep this rank's chunk of the updater's whole state (as a checkpoint restores it) and drop the
        rest: 1/N of the memory from here on."""
        for bucket in self.layout.buckets.values():
            for name, param_slice, _ in bucket.owned():
                whole = updater.state.get(name)
                if whole is not None:
                    self.chunk_state[(name, param_slice.start)] = tuple(
                        np.array(array.reshape(-1)[param_slice] if array.size else array, copy=True)
                        for array in whole)
        updater.state = {}

    def gather_state(self, updater):
        """Every rank's chunks of the updater state, gathered into ``updater.state`` whole on every rank
        (what a checkpoint saves); :meth:`scatter_state` gives the memory back."""
        labels = len(updater.state_names)
        if not labels:                      # plain SGD keeps no state
            return
        for bucket in self.layout.buckets.values():
            whole = [np.zeros(bucket.buffer.size, bucket.dtype) for _ in range(labels)]
            for label in range(labels):
                own = np.zeros(bucket.stop - bucket.start, bucket.dtype)
                for name, param_slice, chunk_slice in bucket.owned():
                    state = self.chunk_state.get((name, param_slice.start))
                    if state is not None and state[label].size:
                        own[chunk_slice] = state[label]
                self.world.allgather_(own, whole[label], bucket.counts)
            for name, offset, count in bucket.entries:
                updater.state[name] = tuple(array[offset:offset + count].copy() for array in whole)

    # --- per epoch ---------------------------------------------------------------------------------

    def check_plan(self, dataset, epoch):
        """Before ``epoch``'s first step: every rank's pass of ``dataset`` gives as many batches, of the same
        sizes, as every other's (a count and a hash of the sizes, all-gathered), so that each step combines
        shares of batches of one size and no rank runs out of batches before the others. Otherwise a
        DistributedError naming each rank's batches, raised on every rank before any step of the epoch."""
        if self.size == 1:
            return
        sizes = np.asarray(dataset.batch_sizes(epoch), np.int64)
        what = f"the all-gather of epoch {epoch + 1}'s batch sizes"
        summaries = self.world.allgather_object((sizes.size, hashlib.sha256(sizes.tobytes()).hexdigest()), what)
        if len(set(summaries)) > 1:
            raise DistributedError(_plans_differ(epoch, self.world.allgather_object(sizes, what)))

    # --- per step ----------------------------------------------------------------------------------

    def shard(self, batch):
        """``(local batch, local rows, global rows)`` of a global MiniBatch."""
        local = shard_batch(batch, self.rank, self.size)
        return local, local.size, batch.size

    def weight(self, local, total):
        """The factor of this rank's gradients in the global step."""
        return local / total if self.loss_reduction == "mean" else 1.0

    def start_tail(self, exchange, graph, loss, local, total, new_state):
        """Start the step's last all-reduce: the loss of this rank's share with its rows and batch size, and
        the state updates (batch norm's running statistics, from each rank's share) weighted by the rows,
        all in one float64 buffer, so a step waits once. A rank without rows adds zeros to the state."""
        names = list(new_state)
        sizes = [graph.stored(name).size for name in names]
        buffer = np.zeros(3 + sum(sizes), np.float64)
        buffer[:3] = [loss if self.loss_reduction == "sum" else loss * local, local, total]
        offset = 3
        for name, size in zip(names, sizes):
            if local and new_state[name] is not None:
                buffer[offset:offset + size] = np.asarray(new_state[name], np.float64).reshape(-1) * local
            offset += size
        exchange.tail = (buffer, names, sizes, total)
        exchange.handles.append(self.world.start_allreduce_(buffer))

    def finish_tail(self, exchange, graph, new_state):
        """The whole batch's loss, once every started collective is done, with the averaged state written
        into ``new_state``; every rank must have read a batch of the same size (ranks reading different
        data are a DistributedError, not a silent mix)."""
        exchange.wait()
        buffer, names, sizes, total = exchange.tail
        if buffer[1] != total or buffer[2] != total * self.size:
            raise DistributedError(f"rank {self.rank} of {self.size}: the ranks read batches of different sizes "
                                   f"(this rank {total} rows; the shares add up to {buffer[1]:g}); every rank "
                                   "must read the same data in the same order (same data set, same Shuffle seed)")
        offset = 3
        for name, size in zip(names, sizes):
            stored = graph.stored(name)
            new_state[name] = (buffer[offset:offset + size] / total).astype(stored.dtype).reshape(stored.shape)
            offset += size
        return buffer[0] if self.loss_reduction == "sum" else buffer[0] / total

    def exchange(self, weight):
        """This step's gradient exchange: pass its ``arrived`` as the GradientStep's ``ready``, then call
        ``finish`` with the step's gradients (``update`` does both when not given one). Refused after a
        step that failed with collectives still running: the ranks' collectives are then out of step."""
        if self.broken:
            raise DistributedError(f"rank {self.rank} of {self.size}: {self.broken}; the ranks' collectives are "
                                   "out of step, so this world cannot train on (start the job again)")
        return Exchange(self, weight)

    def failed(self, exchange, error):
        """Note a step that raised ``error`` while ``exchange`` had collectives running (fit calls it)."""
        if exchange.handles:
            self.broken = f"an earlier step failed with collectives still running ({type(error).__name__}: {error})"

    def update(self, updater, graph, gradients, weight, exchange=None):
        """Combine the ranks' gradients (each weighted by ``weight``) and apply one update everywhere."""
        layout = self.layout
        if exchange is None:
            exchange = self.exchange(weight)
            exchange.finish(gradients)
        if not self.sharded_update:
            exchange.wait()
            updater.step(graph, layout.gradients)
        else:
            rate = updater.begin_step()
            for bucket in layout.buckets.values():
                self.world.reduce_scatter_(bucket.buffer, bucket.chunk, bucket.counts)
                self._update_chunk(updater, graph, bucket, rate)
                self.world.allgather_(bucket.own_values(graph), bucket.buffer, bucket.counts)
                bucket.unpack_values(graph)
        if self.check_weights:
            self.verify(graph, updater.iteration)

    def _update_chunk(self, updater, graph, bucket, rate):
        for name, param_slice, chunk_slice in bucket.owned():
            key = (name, param_slice.start)
            state = self.chunk_state.get(key)
            if state is None:
                state = self.chunk_state[key] = updater.new_state(param_slice.stop - param_slice.start,
                                                                  bucket.dtype)
            flat = graph.stored(name).reshape(-1)
            updater.update_slice(flat[param_slice], bucket.chunk[chunk_slice], state, rate)

    def agree(self, flag):
        """True on every rank when ``flag`` is true on any (rank 0's listeners stopping training)."""
        return bool(flag) if self.size == 1 else self.world.sum(1.0 if flag else 0.0) > 0

    def state_bytes(self):
        """Bytes of updater state this rank holds in the sharded update (0 before the first step)."""
        return sum(array.nbytes for arrays in self.chunk_state.values() for array in arrays)

    def verify(self, graph, step):
        """Fail loudly unless every rank holds bitwise the same variables."""
        digest = hashlib.sha256()
        for node in graph.nodes():
            if node.kind is Kind.VARIABLE:
                digest.update(node.name.encode())
                digest.update(np.ascontiguousarray(graph.stored(node.name)).tobytes())
        hashes = self.world.allgather_object(digest.hexdigest()[:16])
        if len(set(hashes)) > 1:
            raise DistributedError(f"data-parallel step {step}: the ranks' variables differ (hashes by rank: "
                                   f"{', '.join(f'{r}: {h}' for r, h in enumerate(hashes))})")

    def __repr__(self):
        mode = "sharded update" if self.sharded_update else "all-reduce"
        return f"DataParallel({self.world!r}, {mode})"


def _plans_differ(epoch, plans):
    """The message for ranks whose batches (``plans[rank]``, arrays of sizes) differ in ``epoch``."""
    groups = {}
    for rank, sizes in enumerate(plans):
        groups.setdefault(tuple(sizes.tolist()), []).append(rank)
    described = "; ".join(f"{'rank' if len(ranks) == 1 else 'ranks'} {', '.join(map(str, ranks))}: "
                          f"{_batches(sizes)}" for sizes, ranks in groups.items())
    first = next(index for index in range(max(map(len, plans)) + 1)
                 if len({int(sizes[index]) if index < len(sizes) else None for sizes in plans}) > 1)
    at = ", ".join(f"{sizes[first]} rows on rank {rank}" if first < len(sizes) else f"none on rank {rank}"
                   for rank, sizes in enumerate(plans))
    return (f"data-parallel epoch {epoch + 1}: the ranks' data give different batches ({described}); the first "
            f"that differs is batch {first + 1} ({at}). Each step combines every rank's share of one batch, so "
            "every rank must read the same batches (same data set, Shuffle seed and Batch size); no step of "
            "the epoch ran")


def _batches(sizes):
    """``sizes`` (a tuple of batch sizes) in words, runs of one size counted: "4 batches (32 x3, 4 rows)"."""
    if not sizes:
        return "no batches"
    runs = []
    for size in sizes:
        if runs and runs[-1][0] == size:
            runs[-1][1] += 1
        else:
            runs.append([size, 1])
    shown = ", ".join(f"{size} x{count}" if count > 1 else f"{size}" for size, count in runs[:6])
    return f"{len(sizes)} batch{'es' if len(sizes) != 1 else ''} ({shown}{', ...' if len(runs) > 6 else ''} rows)"


# Losses whose mean divides by a count of valid entries (labels not ignored, positions inside the lengths),
# not by the rows: weighting each rank's mean by its rows would not give the whole batch's gradient.
MEANS_OVER_ENTRIES = {"masked_softmax_cross_entropy": "a mean over the valid positions",
                      "nll": "a mean over the labels not equal to ignore_index"}


def _refuse_means_over_entries(graph):
    for name in sorted(graph.ancestors(graph.loss_names)):
        node = graph.node(name)
        why = MEANS_OVER_ENTRIES.get(node.op)
        if node.op == "masked_mean" and node.attributes.get("axis") is None:   # over the batch too
            why = "a mean over every valid position of the batch"
        if why is not None and node.attributes.get("reduction", "mean") == "mean":
            raise DistributedError(
                f"DataParallel: the loss reads {node.op} {node.name!r}, {why}, not over the batch's rows, so the "
                "ranks' gradients cannot be weighted by their rows; give it reduction='sum' and "
                "DataParallel(world, loss_reduction='sum') (and scale the learning rate), or train in one process")


class Bucket:
    """The gradients (then the parameters) of one dtype, packed in one contiguous buffer, and this
    rank's chunk of it for the sharded update."""

    def __init__(self, dtype, entries, size):
        self.dtype = dtype
        self.entries = entries              # (name, offset, count)
        total = sum(count for _, _, count in entries)
        self.buffer = np.zeros(total, dtype)
        self.counts = [b - a for a, b in (shard_rows(total, r, size) for r in range(size))]
        self.start, self.stop, self.chunk = 0, 0, None

    def place(self, rank):
        """Make this rank's chunk: its share of the buffer, as the reduce-scatter gives it."""
        self.start, self.stop = shard_rows(self.buffer.size, rank, len(self.counts))
        self.chunk = np.zeros(self.stop - self.start, self.dtype)


    def owned(self):
        """``(name, slice of the parameter, slice of the chunk)`` for each parameter overlapping this
        rank's chunk."""
        for name, offset, count in self.entries:
            lo, hi = max(offset, self.start), min(offset + count, self.stop)
            if lo < hi:
                yield name, slice(lo - offset, hi - offset), slice(lo - self.start, hi - self.start)

    def own_values(self, graph):
        values = np.empty(self.stop - self.start, self.dtype)
        for name, param_slice, chunk_slice in self.owned():
            values[chunk_slice] = graph.stored(name).reshape(-1)[param_slice]
        return values

    def unpack_values(self, graph):
        for name, offset, count in self.entries:
            graph.stored(name).reshape(-1)[...] = self.buffer[offset:offset + count]


class Layout:
    """The trainable variables' places in one bucket per dtype, in ``names``' order, and the buckets cut
    into segments of whole variables, each of at least ``segment_bytes`` but a bucket's last, ordered by
    their first variable."""

    def __init__(self, graph, names, size, segment_bytes):
        self.names = names
        grouped = {}
        for name in names:
            array = graph.stored(name)
            if array.dtype not in (np.float32, np.float64):
                raise GraphviewError(f"DataParallel: {name!r} has dtype {array.dtype.name}; only float32 and "
                                     "float64 variables are trained")
            grouped.setdefault(array.dtype, []).append((name, array.size))
        self.buckets, self.where = {}, {}
        for dtype, items in grouped.items():
            entries, offset = [], 0
            for name, count in items:
                entries.append((name, offset, count))
                self.where[name] = (dtype, offset, count, graph.stored(name).shape)
                offset += count
            self.buckets[dtype] = Bucket(dtype, entries, size)
        self.segments, self.segment_of = [], {}
        for bucket in self.buckets.values():
            members, start = [], 0
            for index, (name, offset, count) in enumerate(bucket.entries):
                members.append(name)
                stop = offset + count
                if (stop - start) * bucket.dtype.itemsize >= segment_bytes or index == len(bucket.entries) - 1:
                    self.segments.append((members, bucket.buffer[start:stop]))
                    members, start = [], stop
        self.gradients = {name: self.gradient(name) for name in names}   # views of the buckets, per step
        rank = {name: index for index, name in enumerate(names)}
        self.segments.sort(key=lambda segment: rank[segment[0][0]])
        for index, (members, _) in enumerate(self.segments):
            for name in members:
                self.segment_of[name] = index

    def place(self, rank):
        for bucket in self.buckets.values():
            bucket.place(rank)

    def gradient(self, name):
        dtype, offset, count, shape = self.where[name]
        return self.buckets[dtype].buffer[offset:offset + count].reshape(shape)

    def pack(self, name, gradient, weight):
        """``gradient`` times ``weight`` into ``name``'s place (zeros for None)."""
        dtype, offset, count, _ = self.where[name]
        target = self.buckets[dtype].buffer[offset:offset + count]
        if gradient is None:
            target[...] = 0
        else:
            np.multiply(np.asarray(gradient, dtype).reshape(-1), weight, out=target)


class Exchange:
    """One step's gradients on their way into the buckets. In the plain mode each segment's all-reduce
    starts once its gradients are all packed and every earlier segment has started, so every rank
    starts the same collectives in the same order however its run went (a rank without rows packs zeros
    in ``finish``); each arrival also lets MPI move the started ones on. The sharded update packs as the
    gradients arrive and reduce-scatters whole buckets in ``update``."""

    def __init__(self, parallel, weight):
        self.world, self.layout, self.weight = parallel.world, parallel.layout, weight
        self.overlap = not parallel.sharded_update and parallel.size > 1
        self.missing = [len(members) for members, _ in self.layout.segments]
        self.packed, self.started, self.handles = set(), 0, []
        self.tail = None                    # the loss and state all-reduce (DataParallel.start_tail)

    def arrived(self, name, gradient):
        """The GradientStep's ``ready``: pack ``name``'s final gradient, and start what is complete."""
        index = self.layout.segment_of.get(name)
        if index is None or name in self.packed:
            return
        self.layout.pack(name, gradient, self.weight)
        self.packed.add(name)
        self.missing[index] -= 1
        if self.overlap:
            self._start_complete()

    def finish(self, gradients):
        """Pack the gradients that did not arrive during the run (zeros where ``gradients`` has none) and
        start every remaining segment."""
        for name in self.layout.names:
            if name not in self.packed:
                self.arrived(name, gradients.get(name))
        if self.overlap:
            self._start_complete()

    def wait(self):
        """Wait for every started all-reduce: the buckets then hold the global gradients."""
        handles, self.handles = self.handles, []
        self.world.wait_(handles, "the step's all-reduce (gradients, loss, state)")

    def _start_complete(self):
        segments = self.layout.segments
        while self.started < len(segments) and self.missing[self.started] == 0:
            self.handles.append(self.world.start_allreduce_(segments[self.started][1]))
            self.started += 1
        if self.handles:
            self.world.progress_(self.handles)
