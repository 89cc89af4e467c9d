"""The zip side of reading a graph file: its members, and .npy arrays read within checked sizes.

Split from :mod:`graphview.serialization`, whose reader (``_Reader``) builds on
:class:`ArchiveReader`: that reader opens the zip, sets ``archive``, ``members``,
``file_size`` and ``limit`` (the most all arrays may inflate to), and reads each array
through :meth:`ArchiveReader._array`. Every failure is a GraphFileError naming the file.
See adr/0010-graph-file-format.md.
"""
import math
import zipfile

import numpy as np

from graphview import dtypes
from graphview.errors import GraphFileError, GraphviewError
from graphview.shapes import check_size, format_shape

DTYPES = {dtype.name: dtype for dtype in dtypes.ALL}


class _Counting:
    """A read-only stream that counts the bytes read through it (the .npy header's length)."""

    def __init__(self, stream):
        self.stream, self.count = stream, 0

    def read(self, size=-1):
        data = self.stream.read(size)
        self.count += len(data)
        return data


class ArchiveReader:
    """The members of the zip at ``path``, checked, and its .npy arrays, each read at most once."""

    def __init__(self, path):
        self.path = path
        self.used = set()
        self.total = 0

    def fail(self, message):
        raise GraphFileError(f"{self.path}: {message}")

    def _members(self):
        members = {}
        for info in self.archive.infolist():
            if info.filename in members:
                self.fail(f"the member {info.filename!r} appears twice")
            if info.flag_bits & 0x1:
                self.fail(f"the member {info.filename!r} is encrypted; graph files never are")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                self.fail(f"the member {info.filename!r} uses an unsupported compression method "
                          f"({info.compress_type})")
            members[info.filename] = info
        return members

    def _array(self, where, member):
        if not isinstance(member, str) or member not in self.members or not member.endswith(".npy"):
            self.fail(f"{where}: stored value {member!r:.80} is not an .npy member of the file")
        if member in self.used:
            self.fail(f"{where}: the array {member!r} is used twice")
        self.used.add(member)
        info = self.members[member]
        with self.archive.open(info) as stream:
            # Only the header is read before the sizes are checked: the zip's recorded size of the
            # member must be exactly what the header declares, and zipfile never inflates past the
            # recorded size, so a member cannot make loading read more than its header declares.
            header = _Counting(stream)
            shape, fortran, dtype = self._npy_header(where, member, header)
            if dtype not in DTYPES.values() or dtype.byteorder not in ("=", "|", "<" if np.little_endian else ">"):
                self.fail(f"{where}: {member} holds dtype {dtype.str}, not one of {', '.join(DTYPES)}")
            self._check_size(f"{where}: {member}", shape, dtype)
            count = math.prod(shape)
            declared = count * dtype.itemsize
            if header.count + declared != info.file_size:
                self.fail(f"{where}: {member} holds {info.file_size - header.count} data bytes, but its header "
                          f"says {format_shape(shape)} {dtype.name} ({declared} bytes)")
            self.total += info.file_size
            if self.total > self.limit:
                self.fail(f"the arrays inflate to more than {self.limit} bytes, more than the file's "
                          f"{self.file_size} bytes could hold")
            flat = np.empty(count, dtype)
            view = memoryview(flat).cast("B")
            filled = 0
            while filled < declared:
                got = stream.readinto(view[filled:])
                if not got:
                    self.fail(f"{where}: {member} is truncated: {filled} of {declared} data bytes")
                filled += got
            if stream.read(1):  # reaching the end also makes zipfile check the CRC
                self.fail(f"{where}: {member} holds more data than its header declares")
        return flat.reshape(shape, order="F" if fortran else "C")

    def _npy_header(self, where, member, stream):
        """(shape, fortran order, dtype) from the .npy header at the start of ``stream``.

        The header is a Python dict literal that NumPy parses with tokenize and ast.literal_eval (never
        eval); what they raise on bytes from the file (ValueError, SyntaxError, tokenize.TokenError,
        UnicodeDecodeError, ...) all mean one thing: the header is malformed."""
        try:
            version = np.lib.format.read_magic(stream)
            if version == (1, 0):
                return np.lib.format.read_array_header_1_0(stream)
            if version == (2, 0):
                return np.lib.format.read_array_header_2_0(stream)
        except Exception as error:  # noqa: BLE001
            self.fail(f"{where}: {member} has a malformed .npy header ({type(error).__name__}: {error})")
        self.fail(f"{where}: {member} is .npy version {version}, not 1.0 or 2.0")

    def _check_size(self, where, shape, dtype):
        """The size check building applies (shapes.check_size): no node or array NumPy could not hold."""
        try:
            check_size(shape, dtype, where)
        except GraphviewError as error:
            self.fail(str(error))
