#include "tools/strata/symbol_server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace strata {
namespace cli {
namespace {

using rapidjson::Value;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

std::string Hex(uint64_t value) {
  char text[32];
  snprintf(text, sizeof(text), "0x%" PRIx64, value);
  return text;
}

std::string ErrorBody(const std::string& message) {
  rapidjson::StringBuffer buffer;
  Writer writer(buffer);
  writer.StartObject();
  writer.Key("error");
  writer.String(message.c_str(), static_cast<rapidjson::SizeType>(message.size()));
  writer.EndObject();
  return buffer.GetString();
}

void String(Writer& writer, std::string_view text) {
  writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

// "0x1a2b" or a number; false otherwise.
bool ReadOffset(const Value& value, uint64_t* out) {
  if (value.IsUint64()) {
    *out = value.GetUint64();
    return true;
  }
  if (!value.IsString()) return false;
  const char* text = value.GetString();
  if (strncmp(text, "0x", 2) != 0 || text[2] == '\0') return false;
  char* end = nullptr;
  *out = strtoull(text + 2, &end, 16);
  return end != nullptr && *end == '\0';
}

}  // namespace

SymbolServer::SymbolServer(std::vector<SharedLibrary> libs, std::set<std::string> profile_files,
                           std::string source_root)
    : cache_(std::make_shared<DwarfModuleCache>()),
      readable_files_(std::move(profile_files)),
      source_root_(std::move(source_root)) {
  for (SharedLibrary& library : libs) {
    auto key = std::make_pair(library.debug_name.empty() ? library.name : library.debug_name,
                              library.breakpad_id);
    if (modules_.count(key) != 0) continue;
    Module& module = modules_[key];
    module.library = std::move(library);
  }
}

SymbolServer::~SymbolServer() = default;

SymbolServer::Module* SymbolServer::FindModule(const std::string& debug_name,
                                               const std::string& breakpad_id) {
  auto it = modules_.find(std::make_pair(debug_name, breakpad_id));
  if (it == modules_.end()) return nullptr;
  Module& module = it->second;
  if (!module.symbolizer) {
    module.symbolizer =
        std::make_unique<DwarfSymbolizer>(std::vector<SharedLibrary>{module.library}, cache_);
  }
  return &module;
}

bool SymbolServer::MayReadFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  return readable_files_.count(path) != 0;
}

SymbolServer::Reply SymbolServer::Symbolicate(const std::string& request_body) {
  rapidjson::Document request;
  request.Parse(request_body.c_str(), request_body.size());
  if (request.HasParseError() || !request.IsObject()) {
    return {400, ErrorBody("the request is not a JSON object")};
  }
  // {"jobs": [...]} or one job at the top level.
  std::vector<const Value*> jobs;
  if (request.HasMember("jobs")) {
    if (!request["jobs"].IsArray()) return {400, ErrorBody("\"jobs\" is not an array")};
    for (const Value& job : request["jobs"].GetArray()) jobs.push_back(&job);
  } else {
    jobs.push_back(&request);
  }
  size_t total = 0;
  for (const Value* job : jobs) {
    if (!job->IsObject() || !job->HasMember("memoryMap") || !(*job)["memoryMap"].IsArray() ||
        !job->HasMember("stacks") || !(*job)["stacks"].IsArray()) {
      return {400, ErrorBody("a job needs a \"memoryMap\" array and a \"stacks\" array")};
    }
    for (const Value& stack : (*job)["stacks"].GetArray()) {
      if (!stack.IsArray()) return {400, ErrorBody("a stack is not an array")};
      total += stack.Size();
    }
  }
  if (total > kMaxAddressesPerRequest) {
    return {413, ErrorBody("more than " + std::to_string(kMaxAddressesPerRequest) + " addresses")};
  }

  std::lock_guard<std::mutex> lock(mutex_);
  rapidjson::StringBuffer buffer;
  Writer writer(buffer);
  writer.StartObject();
  writer.Key("results");
  writer.StartArray();
  SymbolizeResult result;
  for (const Value* job : jobs) {
    // The memory map: module index -> (name, our module or null).
    std::vector<std::pair<std::string, Module*>> map;
    std::vector<std::pair<std::string, bool>> found;
    for (const Value& entry : (*job)["memoryMap"].GetArray()) {
      if (!entry.IsArray() || entry.Size() < 2 || !entry[0].IsString() || !entry[1].IsString()) {
        return {400, ErrorBody("a memoryMap entry is not [debugName, breakpadId]")};
      }
      const std::string name = entry[0].GetString(), id = entry[1].GetString();
      Module* module = FindModule(name, id);
      map.emplace_back(name, module);
      found.emplace_back(name + "/" + id, module != nullptr);
    }
    writer.StartObject();
    writer.Key("stacks");
    writer.StartArray();
    for (const Value& stack : (*job)["stacks"].GetArray()) {
      writer.StartArray();
      uint32_t frame_index = 0;
      for (const Value& frame : stack.GetArray()) {
        int64_t module_index = -1;
        uint64_t offset = 0;
        if (!frame.IsArray() || frame.Size() < 2 || !frame[0].IsInt64() ||
            !ReadOffset(frame[1], &offset)) {
          return {400, ErrorBody("a frame is not [moduleIndex, moduleOffset]")};
        }
        module_index = frame[0].GetInt64();
        writer.StartObject();
        writer.Key("frame");
        writer.Uint(frame_index++);
        writer.Key("module_offset");
        String(writer, Hex(offset));
        if (module_index >= 0 && static_cast<size_t>(module_index) < map.size()) {
          writer.Key("module");
          String(writer, map[module_index].first);
          Module* module = map[module_index].second;
          if (module != nullptr) {
            const SharedLibrary& lib = module->library;
            const uint64_t address = offset + (lib.start - lib.offset);
            module->symbolizer->Symbolize(absl::MakeConstSpan(&address, 1), &result);
            const auto frames = result.FramesOf(0);
            if (!frames.empty()) {
              const SymbolizedFrame& outer = frames.back();
              writer.Key("function");
              String(writer, outer.function);
              writer.Key("function_offset");
              String(writer, Hex(outer.function_offset));
              if (!outer.file.empty()) {
                readable_files_.insert(std::string(outer.file));
                writer.Key("file");
                String(writer, outer.file);
              }
              if (outer.line != 0) {
                writer.Key("line");
                writer.Uint(outer.line);
              }
              if (frames.size() > 1) {
                writer.Key("inlines");
                writer.StartArray();
                for (size_t i = 0; i + 1 < frames.size(); ++i) {  // Innermost first.
                  writer.StartObject();
                  writer.Key("function");
                  String(writer, frames[i].function);
                  if (!frames[i].file.empty()) {
                    readable_files_.insert(std::string(frames[i].file));
                    writer.Key("file");
                    String(writer, frames[i].file);
                  }
                  if (frames[i].line != 0) {
                    writer.Key("line");
                    writer.Uint(frames[i].line);
                  }
                  writer.EndObject();
                }
                writer.EndArray();
              }
            }
          }
        }
        writer.EndObject();
      }
      writer.EndArray();
    }
    writer.EndArray();
    writer.Key("found_modules");
    writer.StartObject();
    for (const auto& [key, was_found] : found) {
      String(writer, key);
      writer.Bool(was_found);
    }
    writer.EndObject();
    writer.EndObject();
  }
  writer.EndArray();
  writer.EndObject();
  return {200, buffer.GetString()};
}

SymbolServer::Reply SymbolServer::Source(const std::string& request_body) {
  rapidjson::Document request;
  request.Parse(request_body.c_str(), request_body.size());
  if (request.HasParseError() || !request.IsObject() || !request.HasMember("file") ||
      !request["file"].IsString()) {
    return {400, ErrorBody("the request needs a \"file\" string")};
  }
  const std::string path = request["file"].GetString();
  if (!MayReadFile(path)) {
    return {403, ErrorBody(path + " is not a source file of this profile")};
  }
  std::string disk_path = path;
  if (path.empty() || path[0] != '/') {
    if (path == ".." || path.rfind("../", 0) == 0 || path.find("/../") != std::string::npos ||
        (path.size() >= 3 && path.compare(path.size() - 3, 3, "/..") == 0)) {
      return {403, ErrorBody(path + ": a relative name with '..' is not read")};
    }
    if (!source_root_.empty()) disk_path = source_root_ + "/" + path;
  }
  const int fd = open(disk_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return {404, ErrorBody(path + ": " + strerror(errno))};
  struct stat st;
  std::string text;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return {403, ErrorBody(path + " is not a regular file")};
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxSourceBytes) {
    close(fd);
    return {413, ErrorBody(path + " is larger than " + std::to_string(kMaxSourceBytes) + " bytes")};
  }
  text.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd, &text[got], text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(got);
  rapidjson::StringBuffer buffer;
  Writer writer(buffer);
  writer.StartObject();
  writer.Key("symbolsLastModified");
  writer.Null();
  writer.Key("sourceLastModified");
  writer.Null();
  writer.Key("file");
  String(writer, path);
  writer.Key("source");
  String(writer, text);
  writer.EndObject();
  return {200, buffer.GetString()};
}

std::set<std::string> SourceFilesNamedInProfile(const std::string& profile_json_text) {
  // Frame strings "name (in lib) (file:line)" anywhere in the text: the profile's string
  // tables hold them as JSON strings, so a scan of the text finds them without walking the
  // document (escapes: paths with '"' or '\' are simply not found).
  std::set<std::string> files;
  const std::string& s = profile_json_text;
  size_t at = 0;
  while ((at = s.find(") (", at)) != std::string::npos) {
    const size_t begin = at + 3;
    at = begin;
    const size_t close = s.find_first_of(")\"", begin);
    if (close == std::string::npos || s[close] != ')') continue;
    const std::string inside = s.substr(begin, close - begin);
    const size_t colon = inside.rfind(':');
    if (colon == std::string::npos || colon == 0) continue;
    bool digits = colon + 1 < inside.size();
    for (size_t i = colon + 1; i < inside.size(); ++i) digits = digits && isdigit(static_cast<unsigned char>(inside[i]));
    if (digits) files.insert(inside.substr(0, colon));
  }
  return files;
}

}  // namespace cli
}  // namespace strata
