"""MCUboot images as the SMP fixture's bootloader sees them: read a header and its TLV areas, check the
SHA-256 TLV, and build small images for a device's factory firmware (tests only).

Written from MCUboot's "Image format" design notes. An image is, in this order (little endian):

    | field            | size | meaning                                                  |
    |------------------|------|----------------------------------------------------------|
    | ih_magic         | 4    | 0x96f3b83d                                               |
    | ih_load_addr     | 4    |                                                          |
    | ih_hdr_size      | 2    | header size, padding included (the body starts there)    |
    | ih_protect_tlv_size | 2 | size of the protected TLV area (0: none)                 |
    | ih_img_size      | 4    | body size                                                |
    | ih_flags         | 4    | IMAGE_F_* (0x10: not bootable)                           |
    | ih_ver           | 8    | major u8, minor u8, revision u16, build number u32       |
    | _pad1            | 4    |                                                          |

then the body, then the protected TLV area (info 0x6908, total size u16, entries) if any, then the
unprotected one (info 0x6907, total size u16 counting its own 4 bytes, entries). An entry is type u16,
length u16, value. The SHA-256 TLV (0x10) holds SHA-256 over header, body and protected TLV area: that
value is the image's "hash" in MCUmgr's image state.

Every read is bounds-checked: a hostile or truncated image raises ImageError, never IndexError.
"""

import dataclasses
import hashlib
import struct

IMAGE_MAGIC = 0x96F3B83D
HEADER_SIZE = 32
TLV_INFO_MAGIC = 0x6907
TLV_PROT_INFO_MAGIC = 0x6908
TLV_SHA256 = 0x10
IMAGE_F_NON_BOOTABLE = 0x10

_HEADER = struct.Struct("<IIHHIIBBHII")


class ImageError(ValueError):
    """The bytes are not an MCUboot image this bootloader can use (the reason is the message)."""


@dataclasses.dataclass(frozen=True)
class Version:
    major: int
    minor: int
    revision: int
    build: int = 0

    def __str__(self):
        # As MCUmgr's image state prints it: x.y.z, and .build only when it is not 0.
        text = f"{self.major}.{self.minor}.{self.revision}"
        return f"{text}.{self.build}" if self.build else text

    def triple(self):
        return (self.major, self.minor, self.revision)

    @classmethod
    def parse(cls, text):
        parts = str(text).split(".")
        if not 3 <= len(parts) <= 4 or not all(p.isdigit() for p in parts):
            raise ValueError(f"`{text}` is not a version: write major.minor.revision[.build]")
        numbers = [int(p) for p in parts] + [0] * (4 - len(parts))
        if numbers[0] > 255 or numbers[1] > 255 or numbers[2] > 0xFFFF or numbers[3] > 0xFFFFFFFF:
            raise ValueError(f"`{text}`: a field is too large for an MCUboot header")
        return cls(*numbers)


@dataclasses.dataclass(frozen=True)
class ImageInfo:
    """What a bootloader reads from an image."""

    version: Version
    flags: int
    header_size: int
    image_size: int
    protected_tlv_size: int
    tlvs: tuple  # ((type, value bytes), ...): protected ones first
    hash: bytes  # the SHA-256 TLV's value
    hash_valid: bool  # whether it matches what the header, body and protected TLVs hash to
    size: int  # header + body + both TLV areas

    @property
    def bootable(self):
        return not self.flags & IMAGE_F_NON_BOOTABLE


def read_header(data):
    """(magic, hdr_size, protect_tlv_size, img_size, flags, Version) from the first 32 bytes."""
    if len(data) < HEADER_SIZE:
        raise ImageError(f"an MCUboot header is {HEADER_SIZE} bytes; got {len(data)}")
    magic, _load, hdr_size, prot_size, img_size, flags, major, minor, revision, build, _pad = \
        _HEADER.unpack_from(bytes(data[:HEADER_SIZE]))
    if magic != IMAGE_MAGIC:
        raise ImageError(f"no MCUboot magic (0x{magic:08x})")
    if hdr_size < HEADER_SIZE:
        raise ImageError(f"header size {hdr_size} is smaller than the header")
    return magic, hdr_size, prot_size, img_size, flags, Version(major, minor, revision, build)


def _read_tlv_area(data, start, magic):
    """(entries, end) of the TLV area at `start` whose info header has `magic`."""
    if start + 4 > len(data):
        raise ImageError(f"the TLV area at {start} is past the end ({len(data)} bytes)")
    found, total = struct.unpack_from("<HH", data, start)
    if found != magic:
        raise ImageError(f"TLV info magic 0x{found:04x} at {start}, expected 0x{magic:04x}")
    end = start + total
    if total < 4 or end > len(data):
        raise ImageError(f"the TLV area at {start} claims {total} bytes; {len(data) - start} remain")
    entries = []
    at = start + 4
    while at < end:
        if at + 4 > end:
            raise ImageError(f"a TLV entry header at {at} crosses the area's end")
        kind, length = struct.unpack_from("<HH", data, at)
        if at + 4 + length > end:
            raise ImageError(f"TLV 0x{kind:02x} at {at} ({length} bytes) crosses the area's end")
        entries.append((kind, bytes(data[at + 4:at + 4 + length])))
        at += 4 + length
    return entries, end


def parse(data):
    """The ImageInfo of `data` (header, body, TLVs; trailing bytes such as padding are ignored)."""
    data = bytes(data)
    _, hdr_size, prot_size, img_size, flags, version = read_header(data)
    body_end = hdr_size + img_size
    if body_end > len(data):
        raise ImageError(f"header and body are {body_end} bytes; the image has {len(data)}")
    entries = []
    at = body_end
    if prot_size:
        protected, at = _read_tlv_area(data, at, TLV_PROT_INFO_MAGIC)
        if at - body_end != prot_size:
            raise ImageError(f"protected TLV area is {at - body_end} bytes; the header says {prot_size}")
        entries += protected
    unprotected, end = _read_tlv_area(data, at, TLV_INFO_MAGIC)
    entries += unprotected
    hashes = [value for kind, value in entries if kind == TLV_SHA256]
    if len(hashes) != 1 or len(hashes[0]) != 32:
        raise ImageError(f"an image carries one 32-byte SHA-256 TLV; found {[len(h) for h in hashes]}")
    computed = hashlib.sha256(data[:body_end + prot_size]).digest()
    return ImageInfo(version=version, flags=flags, header_size=hdr_size, image_size=img_size,
                     protected_tlv_size=prot_size, tlvs=tuple(entries), hash=hashes[0],
                     hash_valid=computed == hashes[0], size=end)


def build(body, version, flags=0, header_size=0x200, load_addr=0):
    """An unsigned image (SHA-256 TLV only) around `body`, as `imgtool sign` without a key lays it out."""
    if isinstance(version, str):
        version = Version.parse(version)
    header = _HEADER.pack(IMAGE_MAGIC, load_addr, header_size, 0, len(body), flags, version.major,
                          version.minor, version.revision, version.build, 0)
    # The header is padded as erased flash reads (0xff), as `imgtool sign --pad-header` does.
    signed = header + b"\xff" * (header_size - HEADER_SIZE) + bytes(body)
    digest = hashlib.sha256(signed).digest()
    tlv = struct.pack("<HH", TLV_SHA256, len(digest)) + digest
    return signed + struct.pack("<HH", TLV_INFO_MAGIC, 4 + len(tlv)) + tlv


def version_of_first_chunk(chunk):
    """The version in the header at the start of an upload's first chunk (ImageError if it has none)."""
    return read_header(chunk)[5]
