// Finding model files on local disks, as Hugging Face's and Data-Juicer's
// caches lay them out; djshard never downloads.
#include "djshard/model/model_path.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

namespace djshard::model {

namespace {

bool Exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string Home() {
  const std::string h = Env("HOME");
  return h.empty() ? std::string(".") : h;
}

}  // namespace

ModelLookup FindHuggingFaceModel(const std::string& name, const std::string& revision) {
  ModelLookup r;
  r.searched.push_back(name);
  if (Exists(name)) {
    r.path = name;
    return r;
  }
  const size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size() ||
      name.find('/', slash + 1) != std::string::npos) {
    return r;  // not an "org/name" id
  }
  const std::string flat = name.substr(0, slash) + "--" + name.substr(slash + 1);
  const std::string home = Env("DJSHARD_MODEL_HOME");
  if (!home.empty()) {
    const std::string p = home + "/" + flat;
    r.searched.push_back(p);
    if (Exists(p)) {
      r.path = p;
      return r;
    }
  }
  std::string hub = Env("HF_HUB_CACHE");
  if (hub.empty()) {
    const std::string hf_home = Env("HF_HOME");
    hub = hf_home.empty() ? Home() + "/.cache/huggingface/hub" : hf_home + "/hub";
  }
  const std::string repo = hub + "/models--" + flat;
  const std::string ref = repo + "/refs/" + revision;
  std::string rev;
  std::ifstream in(ref);
  if (in) std::getline(in, rev);
  while (!rev.empty() && (rev.back() == '\n' || rev.back() == '\r' || rev.back() == ' ')) {
    rev.pop_back();
  }
  if (rev.empty()) {
    r.searched.push_back(ref + " (names the snapshot)");
    return r;
  }
  const std::string snap = repo + "/snapshots/" + rev;
  r.searched.push_back(snap);
  if (Exists(snap)) r.path = snap;
  return r;
}

std::string DataJuicerCacheDir(const char* variable, const char* name) {
  if (const std::string dir = Env(variable); !dir.empty()) return dir;
  if (const std::string home = Env("DATA_JUICER_CACHE_HOME"); !home.empty()) {
    return home + "/" + name;
  }
  const std::string cache = Env("CACHE_HOME");
  return (cache.empty() ? Home() + "/.cache" : cache) + "/data_juicer/" + name;
}

ModelLookup FindDataJuicerModelFile(const std::string& file_name) {
  ModelLookup r;
  std::vector<std::string> candidates;
  if (const std::string h = Env("DJSHARD_MODEL_HOME"); !h.empty()) {
    candidates.push_back(h + "/" + file_name);
  }
  // Data-Juicer's check_model: the name as a path (from the working
  // directory), each directory of DATA_JUICER_EXTERNAL_MODELS_HOME, the cache.
  candidates.push_back(file_name);
  const std::string external = Env("DATA_JUICER_EXTERNAL_MODELS_HOME");
  for (size_t at = 0; at <= external.size() && !external.empty();) {
    size_t end = external.find(':', at);
    if (end == std::string::npos) end = external.size();
    const std::string entry = external.substr(at, end - at);
    const size_t first = entry.find_first_not_of(" \t\n\r");
    if (first != std::string::npos) {
      const size_t last = entry.find_last_not_of(" \t\n\r");
      candidates.push_back(entry.substr(first, last - first + 1) + "/" + file_name);
    }
    at = end + 1;
  }
  candidates.push_back(DataJuicerCacheDir("DATA_JUICER_MODELS_CACHE", "models") + "/" + file_name);
  for (const std::string& p : candidates) {
    r.searched.push_back(p);
    if (Exists(p)) {
      r.path = p;
      return r;
    }
  }
  return r;
}

std::string ListSearched(const std::vector<std::string>& searched) {
  std::string out;
  for (const std::string& s : searched) out += "\n  " + s;
  return out;
}

}  // namespace djshard::model
