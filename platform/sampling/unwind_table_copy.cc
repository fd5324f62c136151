#include "platform/sampling/unwind_table_copy.h"

#include <elf.h>

#include <cstring>

#include "platform/checked_read.h"

namespace strata {
namespace {

// DWARF exception-header pointer encodings (the LSB's DW_EH_PE_*).
constexpr uint8_t kOmit = 0xff;
constexpr uint8_t kAbsolute = 0x00;  // DW_EH_PE_absptr: an 8-byte address.
constexpr uint8_t kUdata4 = 0x03;
constexpr uint8_t kUdata8 = 0x04;
constexpr uint8_t kPcrel = 0x10;
constexpr uint8_t kIndirect = 0x80;
constexpr uint8_t kPcrelSdata4 = 0x1b;
constexpr uint8_t kDatarelSdata4 = 0x3b;

// A cursor over bytes copied from the program: `bytes` (local) hold the program's bytes from
// `origin` on. Every read is bounded by `end`; a read past it fails the cursor.
struct Reader {
  const uint8_t* bytes;
  size_t end;
  uintptr_t origin;
  size_t at = 0;
  bool ok = true;
  bool unreadable = false;  // An indirect pointer's word could not be read.

  bool Take(void* out, size_t length) {
    if (!ok || length > end - at) return ok = false;
    std::memcpy(out, bytes + at, length);
    at += length;
    return true;
  }
  uint8_t Byte() {
    uint8_t value = 0;
    Take(&value, 1);
    return value;
  }
  uint64_t Uleb() {
    uint64_t value = 0;
    for (int shift = 0; ok; shift += 7) {
      const uint8_t byte = Byte();
      if (shift < 64) value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) break;
    }
    return value;
  }
  int64_t Sleb() {
    uint64_t value = 0;
    int shift = 0;
    uint8_t byte = 0x80;
    while (ok && (byte & 0x80)) {
      byte = Byte();
      if (shift < 64) value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      shift += 7;
    }
    if (shift < 64 && (byte & 0x40)) value |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(value);
  }
  template <typename T>
  T Fixed() {
    T value{};
    Take(&value, sizeof(value));
    return value;
  }

  // A pointer in `encoding` (absolute or pc-relative, optionally indirect: the word it names
  // is read, checked). False for an encoding the copy does not support.
  bool Pointer(uint8_t encoding, uint64_t* value) {
    *value = 0;
    if (encoding == kOmit) return true;
    const uintptr_t field = origin + at;
    uint64_t raw = 0;
    switch (encoding & 0x0f) {
      case 0x00: raw = Fixed<uint64_t>(); break;
      case 0x01: raw = Uleb(); break;
      case 0x02: raw = Fixed<uint16_t>(); break;
      case 0x03: raw = Fixed<uint32_t>(); break;
      case 0x04: raw = Fixed<uint64_t>(); break;
      case 0x09: raw = static_cast<uint64_t>(Sleb()); break;
      case 0x0a: raw = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int16_t>())); break;
      case 0x0b: raw = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int32_t>())); break;
      case 0x0c: raw = Fixed<uint64_t>(); break;
      default: return ok = false;
    }
    switch (encoding & 0x70) {
      case 0x00: break;
      case kPcrel: raw += field; break;
      default: return ok = false;  // textrel, datarel, funcrel, aligned: not on x86-64 Linux.
    }
    if ((encoding & kIndirect) && ok &&
        !CheckedRead(reinterpret_cast<const void*>(static_cast<uintptr_t>(raw)), &raw,
                     sizeof(raw))) {
      unreadable = true;
      return ok = false;
    }
    *value = raw;
    return ok;
  }
};

// Output into the copy's entries, bounded.
struct Writer {
  uint8_t* bytes;
  size_t capacity;
  size_t at = 0;
  bool ok = true;

  void Put(const void* data, size_t length) {
    if (!ok || length > capacity - at) {
      ok = false;
      return;
    }
    std::memcpy(bytes + at, data, length);
    at += length;
  }
  void Byte(uint8_t value) { Put(&value, 1); }
  void U32(uint32_t value) { Put(&value, 4); }
  void U64(uint64_t value) { Put(&value, 8); }
  void Uleb(uint64_t value) {
    do {
      uint8_t byte = value & 0x7f;
      value >>= 7;
      if (value) byte |= 0x80;
      Byte(byte);
    } while (value);
  }
  void Patch32(size_t offset, uint32_t value) {
    if (ok) std::memcpy(bytes + offset, &value, 4);
  }
};

// Reads the length word of the .eh_frame entry at `entry` and the entry itself into
// source[*used...]; returns the entry's body (after the length word) as a Reader over the
// copied bytes. The 64-bit format (length 0xffffffff) is not supported.
bool ReadEntry(uintptr_t entry, UnwindTableCopy* copy, size_t* used, Reader* body,
               UnwindCopyResult* failure) {
  uint32_t length = 0;
  if (!CheckedRead(reinterpret_cast<const void*>(entry), &length, 4)) {
    *failure = UnwindCopyResult::kUnreadable;
    return false;
  }
  if (length == 0xffffffffu || length < 4 || length > sizeof(copy->source) - *used) {
    *failure = UnwindCopyResult::kUnsupported;
    return false;
  }
  uint8_t* destination = copy->source + *used;
  if (!CheckedRead(reinterpret_cast<const void*>(entry + 4), destination, length)) {
    *failure = UnwindCopyResult::kUnreadable;
    return false;
  }
  *used += length;
  *body = Reader{destination, length, entry + 4};
  return true;
}

// The .eh_frame_hdr search: the FDE for `pc` (the last table entry at or below it), or 0.
// Entry reads are checked; the last few candidates are read in one call.
UnwindCopyResult FindFde(uintptr_t hdr, uintptr_t pc, UnwindTableCopy* copy, uintptr_t* fde) {
  uint8_t header[12];
  if (!CheckedRead(reinterpret_cast<const void*>(hdr), header, sizeof(header))) {
    return UnwindCopyResult::kUnreadable;
  }
  if (header[0] != 1 || header[1] != kPcrelSdata4 || header[2] != kUdata4 ||
      header[3] != kDatarelSdata4) {
    return UnwindCopyResult::kUnsupported;
  }
  uint32_t count;
  std::memcpy(&count, header + 8, 4);
  struct Entry {
    int32_t start;
    int32_t fde;
  };
  const uintptr_t table = hdr + sizeof(header);
  const int32_t relative_pc = static_cast<int32_t>(pc - hdr);
  constexpr size_t kWindow = sizeof(copy->source) / sizeof(Entry);
  size_t low = 0;
  size_t high = count;
  bool found = false;
  int32_t found_fde = 0;
  while (low < high) {
    if (high - low <= kWindow) {
      Entry* window = reinterpret_cast<Entry*>(copy->source);
      if (!CheckedRead(reinterpret_cast<const void*>(table + low * sizeof(Entry)), window,
                       (high - low) * sizeof(Entry))) {
        return UnwindCopyResult::kUnreadable;
      }
      for (size_t i = 0; i < high - low && window[i].start <= relative_pc; ++i) {
        found = true;
        found_fde = window[i].fde;
      }
      break;
    }
    const size_t middle = low + (high - low) / 2;
    Entry entry;
    if (!CheckedRead(reinterpret_cast<const void*>(table + middle * sizeof(Entry)), &entry,
                     sizeof(entry))) {
      return UnwindCopyResult::kUnreadable;
    }
    if (relative_pc < entry.start) {
      high = middle;
    } else {
      found = true;
      found_fde = entry.fde;
      low = middle + 1;
    }
  }
  *fde = found ? hdr + static_cast<intptr_t>(found_fde) : 0;
  return found ? UnwindCopyResult::kCopied : UnwindCopyResult::kNoEntry;
}

// Whether a CFA program (`bytes`, `length`) holds a DWARF expression, or an opcode not known
// here (then it may). The operands are skipped by their encodings (DWARF 5, section 6.4.2).
bool CfaProgramHasExpression(const uint8_t* bytes, size_t length) {
  size_t at = 0;
  const auto uleb = [&]() {
    while (at < length && (bytes[at++] & 0x80) != 0) {
    }
  };
  while (at < length) {
    const uint8_t op = bytes[at++];
    switch (op >> 6) {
      case 1:  // advance_loc
      case 3:  // restore
        continue;
      case 2:  // offset: ULEB
        uleb();
        continue;
      default:
        break;
    }
    switch (op) {
      case 0x00: case 0x0a: case 0x0b:  // nop, remember_state, restore_state
        break;
      case 0x01: at += 8; break;  // set_loc (the copy's absolute encoding)
      case 0x02: at += 1; break;  // advance_loc1
      case 0x03: at += 2; break;  // advance_loc2
      case 0x04: at += 4; break;  // advance_loc4
      case 0x06: case 0x07: case 0x08: case 0x0d: case 0x0e: case 0x13: case 0x2e:
        uleb();  // one operand (ULEB or SLEB: skipped alike)
        break;
      case 0x05: case 0x09: case 0x0c: case 0x11: case 0x12: case 0x14: case 0x15: case 0x2f:
        uleb();
        uleb();
        break;
      default:  // 0x0f, 0x10, 0x16: expressions; anything else: unknown
        return true;
    }
  }
  return false;
}

// What the CIE says that the FDE copy needs.
struct CieShape {
  bool sized = false;        // 'z'
  bool has_lsda = false;     // 'L' with an encoding other than omit
  uint8_t lsda_encoding = kOmit;
  uint8_t fde_encoding = kAbsolute;
  bool has_expression = false;  // In the CIE's initial instructions.
};

// Re-encodes the CIE (`cie`: its body, after the length word) into `out` with absolute
// 8-byte pointers. False when it cannot be copied (cie.unreadable: because the word of an
// indirect pointer was unreadable).
bool CopyCie(Reader& cie, Writer& out, CieShape* shape) {
  const size_t length_at = out.at;
  out.U32(0);  // Length, patched below.
  if (cie.Fixed<uint32_t>() != 0) return false;  // Not a CIE.
  out.U32(0);
  const uint8_t version = cie.Byte();
  if (version != 1 && version != 3) return false;
  out.Byte(version);
  char letters[8];
  size_t letter_count = 0;
  for (uint8_t letter = cie.Byte(); cie.ok && letter != 0; letter = cie.Byte()) {
    if (letter_count == sizeof(letters)) return false;
    letters[letter_count++] = static_cast<char>(letter);
  }
  out.Put(letters, letter_count);
  out.Byte(0);
  // Code and data alignment factors, return-address column: copied as they are.
  const size_t fixed_from = cie.at;
  cie.Uleb();
  cie.Sleb();
  if (version == 1) {
    cie.Byte();
  } else {
    cie.Uleb();
  }
  if (!cie.ok) return false;
  out.Put(cie.bytes + fixed_from, cie.at - fixed_from);
  size_t instructions_at = cie.at;
  if (letter_count > 0) {
    if (letters[0] != 'z') return false;
    shape->sized = true;
    const uint64_t augmentation_length = cie.Uleb();
    instructions_at = cie.at + augmentation_length;
    Writer augmentation{out.bytes + out.at + 1, out.capacity - out.at - 1};
    for (size_t i = 1; i < letter_count; ++i) {
      switch (letters[i]) {
        case 'P': {
          uint64_t personality = 0;
          if (!cie.Pointer(cie.Byte(), &personality)) return false;
          augmentation.Byte(kAbsolute);
          augmentation.U64(personality);
          break;
        }
        case 'L':
          shape->lsda_encoding = cie.Byte();
          shape->has_lsda = shape->lsda_encoding != kOmit;
          augmentation.Byte(shape->has_lsda ? kAbsolute : kOmit);
          break;
        case 'R':
          shape->fde_encoding = cie.Byte();
          augmentation.Byte(kAbsolute);
          break;
        case 'S':
          break;
        default:
          return false;
      }
    }
    // The augmentation's length fits one uleb byte (at most 1 + 9 + 2 + 2 bytes).
    if (!cie.ok || !augmentation.ok || augmentation.at >= 0x80) return false;
    out.Byte(static_cast<uint8_t>(augmentation.at));
    out.at += augmentation.at;
    if (out.at > out.capacity) return false;
  }
  if (instructions_at > cie.end) return false;
  shape->has_expression =
      CfaProgramHasExpression(cie.bytes + instructions_at, cie.end - instructions_at);
  out.Put(cie.bytes + instructions_at, cie.end - instructions_at);
  out.Patch32(length_at, static_cast<uint32_t>(out.at - length_at - 4));
  return out.ok;
}

// Re-encodes the FDE (`fde`: its body, after the length word; its CIE pointer already read)
// into `out`, whose CIE copy starts at `cie_copy`.
bool CopyFde(Reader& fde, const CieShape& shape, size_t cie_copy, Writer& out,
             bool* has_expression, uint64_t* covered_start, uint64_t* covered_range) {
  uint64_t start = 0;
  if (!fde.Pointer(shape.fde_encoding, &start)) return false;
  uint64_t range = 0;
  if (!fde.Pointer(shape.fde_encoding & 0x0f, &range)) return false;
  size_t instructions_at = fde.at;
  uint64_t lsda = 0;
  if (shape.sized) {
    const uint64_t augmentation_length = fde.Uleb();
    instructions_at = fde.at + augmentation_length;
    if (shape.has_lsda && !fde.Pointer(shape.lsda_encoding, &lsda)) return false;
  }
  if (!fde.ok || instructions_at > fde.end) return false;
  const size_t length_at = out.at;
  out.U32(0);
  out.U32(static_cast<uint32_t>(out.at - cie_copy));  // From this field back to the CIE copy.
  out.U64(start);
  out.U64(range);
  if (shape.sized) {
    out.Uleb(shape.has_lsda ? 8 : 0);
    if (shape.has_lsda) out.U64(lsda);
  }
  *has_expression = CfaProgramHasExpression(fde.bytes + instructions_at, fde.end - instructions_at);
  *covered_start = start;
  *covered_range = range;
  out.Put(fde.bytes + instructions_at, fde.end - instructions_at);
  out.Patch32(length_at, static_cast<uint32_t>(out.at - length_at - 4));
  return out.ok;
}

}  // namespace

UnwindCopyResult BuildUnwindTableCopy(const dl_find_object& found, uintptr_t pc,
                                      UnwindTableCopy* copy, dl_phdr_info* info) {
  const uintptr_t hdr = reinterpret_cast<uintptr_t>(found.dlfo_eh_frame);
  if (hdr == 0 || found.dlfo_link_map == nullptr) return UnwindCopyResult::kNoEntry;
  uintptr_t fde = 0;
  UnwindCopyResult result = FindFde(hdr, pc, copy, &fde);
  if (result != UnwindCopyResult::kCopied) return result;

  size_t used = 0;
  Reader fde_body{};
  if (!ReadEntry(fde, copy, &used, &fde_body, &result)) return result;
  const uint32_t cie_pointer = fde_body.Fixed<uint32_t>();
  if (cie_pointer == 0) return UnwindCopyResult::kUnsupported;  // A CIE, not an FDE.
  Reader cie_body{};
  if (!ReadEntry(fde + 4 - cie_pointer, copy, &used, &cie_body, &result)) return result;

  Writer out{copy->entries, sizeof(copy->entries)};
  CieShape shape;
  if (!CopyCie(cie_body, out, &shape)) {
    return cie_body.unreadable ? UnwindCopyResult::kUnreadable : UnwindCopyResult::kUnsupported;
  }
  const size_t fde_copy = out.at;
  bool fde_has_expression = false;
  uint64_t covered_start = 0, covered_range = 0;
  if (!CopyFde(fde_body, shape, 0, out, &fde_has_expression, &covered_start, &covered_range)) {
    return fde_body.unreadable ? UnwindCopyResult::kUnreadable : UnwindCopyResult::kUnsupported;
  }

  const uintptr_t load = found.dlfo_link_map->l_addr;
  const uintptr_t entries = reinterpret_cast<uintptr_t>(copy->entries);
  uint8_t* header = copy->eh_frame_hdr;
  header[0] = 1;
  header[1] = kUdata8;  // eh_frame_ptr: the FDE copy's address.
  header[2] = kUdata4;  // fde_count: 1.
  header[3] = kOmit;    // No search table: libunwind searches the one FDE linearly.
  const uint64_t first_fde = entries + fde_copy;
  const uint32_t fde_count = 1;
  std::memcpy(header + 4, &first_fde, 8);
  std::memcpy(header + 12, &fde_count, 4);

  const uintptr_t map_start = reinterpret_cast<uintptr_t>(found.dlfo_map_start);
  const uintptr_t map_end = reinterpret_cast<uintptr_t>(found.dlfo_map_end);
  std::memset(copy->headers, 0, sizeof(copy->headers));
  copy->headers[0].p_type = PT_LOAD;
  copy->headers[0].p_vaddr = map_start - load;
  copy->headers[0].p_memsz = copy->headers[0].p_filesz = map_end - map_start;
  copy->headers[1].p_type = PT_LOAD;
  copy->headers[1].p_vaddr = reinterpret_cast<uintptr_t>(copy) - load;
  copy->headers[1].p_memsz = copy->headers[1].p_filesz = sizeof(*copy);
  copy->headers[2].p_type = PT_GNU_EH_FRAME;
  copy->headers[2].p_vaddr = reinterpret_cast<uintptr_t>(header) - load;
  copy->headers[2].p_memsz = copy->headers[2].p_filesz = sizeof(copy->eh_frame_hdr);

  *info = {};
  info->dlpi_addr = load;
  info->dlpi_name = found.dlfo_link_map->l_name;
  info->dlpi_phdr = copy->headers;
  info->dlpi_phnum = 3;
  copy->fde_address = fde;
  copy->has_expression = shape.has_expression || fde_has_expression;
  copy->pc_begin = static_cast<uintptr_t>(covered_start);
  copy->pc_end = static_cast<uintptr_t>(covered_start + covered_range);
  return UnwindCopyResult::kCopied;
}

}  // namespace strata
