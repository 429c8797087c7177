#include "core/tuner/io/build_id.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstdio>
#include <cstring>

namespace commtune {

namespace {

struct Search {
  const void* base = nullptr;  // the object's load address, from dladdr
  const char* path = nullptr;  // or the path it was loaded from
  std::string id;
};

bool is_sought(const dl_phdr_info* info, const Search& search) {
  if (search.path) return info->dlpi_name && std::strcmp(info->dlpi_name, search.path) == 0;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_offset == 0 &&
        reinterpret_cast<const void*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr) == search.base)
      return true;
  return false;
}

int find_note(dl_phdr_info* info, std::size_t, void* data) {
  auto& search = *static_cast<Search*>(data);
  if (!is_sought(info, search)) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& header = info->dlpi_phdr[i];
    if (header.p_type != PT_NOTE) continue;
    const auto* at = reinterpret_cast<const unsigned char*>(info->dlpi_addr + header.p_vaddr);
    const auto* end = at + header.p_memsz;
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, at, sizeof note);
      const auto* name = at + sizeof note;
      const auto* desc = name + ((note.n_namesz + 3) & ~3u);
      const auto* next = desc + ((note.n_descsz + 3) & ~3u);
      if (next > end) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        for (std::size_t k = 0; k < note.n_descsz; ++k) {
          char hex[3];
          std::snprintf(hex, sizeof hex, "%02x", desc[k]);
          search.id += hex;
        }
        return 1;
      }
      at = next;
    }
  }
  return 1;  // the object holding the address has no build id
}

}  // namespace

std::string build_id_of(const void* address) {
  Dl_info info{};
  if (!dladdr(address, &info) || !info.dli_fbase) return "";
  Search search;
  search.base = info.dli_fbase;
  dl_iterate_phdr(find_note, &search);
  return search.id;
}

std::string build_id_of_loaded(const std::string& path) {
  Search search;
  search.path = path.c_str();
  dl_iterate_phdr(find_note, &search);
  return search.id;
}

}  // namespace commtune
