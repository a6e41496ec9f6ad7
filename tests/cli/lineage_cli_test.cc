// Black-box tests of expand/gather lineage (SPEC-lineage §8): the real binary,
// expected outputs from an independent Python model of the spec
// (tests/cli/tools/lineage_expected.py), never from djshard itself.
#include <openssl/sha.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

using nlohmann::json;

const std::vector<std::string> kTestOps = {"DJSHARD_ENABLE_TEST_OPERATORS=1"};

class LineageCli : public CliTest {
 protected:
  // Runs the Python model with `args` in the test directory; returns stdout.
  std::string Py(const std::string& args) const {
    const std::string cmd = "cd '" + dir_ +
                            "' && /usr/bin/python3 '" DJSHARD_SOURCE_DIR
                            "/tests/cli/tools/lineage_expected.py' " +
                            args;
    FILE* p = popen(cmd.c_str(), "r");
    EXPECT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    EXPECT_EQ(pclose(p), 0) << cmd;
    return out;
  }
  std::string Recipe(const std::string& dataset, const std::string& body,
                     const std::string& extra = "") const {
    return Write("recipe.yaml", "dataset_path: " + dataset + "\n" + extra + "process:\n" + body);
  }
  // `djshard run` of recipe.yaml into `out` with test operators enabled.
  CliResult RunRecipe(const std::string& out, int threads = 2) const {
    return WaitFor(Spawn({"run", "--config", "recipe.yaml", "--threads", std::to_string(threads),
                          "--export-path", out},
                         kTestOps));
  }
  json Stats(const std::string& out) const { return json::parse(Read(out + ".stats.json")); }
  std::vector<json> ErrorLines(const std::string& out) const {
    std::vector<json> rows;
    std::istringstream in(Read(out + ".errors.jsonl"));
    std::string line;
    while (std::getline(in, line)) rows.push_back(json::parse(line));
    return rows;
  }
};

// §8.1
TEST_F(LineageCli, IdentityRegionWritesEveryRecordAsRead) {
  Py("corpus docs.jsonl 2000 11");
  for (const char* by : {"paragraph", "sentence", "lines", "chars:7"}) {
    Recipe("docs.jsonl", std::string("  - expand: {name: r, by: \"") + by +
                             "\"}\n  - gather: {name: r, on_empty: keep_original}\n");
    const CliResult r = RunRecipe("out.jsonl");
    ASSERT_EQ(r.exit_code, 0) << by << r.err;
    EXPECT_TRUE(Read("out.jsonl") == Read("docs.jsonl")) << by;
    const json region = Stats("out.jsonl")["regions"]["r"];
    EXPECT_EQ(region["children_expanded"].get<uint64_t>(),
              std::stoull(Py(std::string("count ") + by + " docs.jsonl")))
        << by;
    EXPECT_EQ(region["parents_in"], 2000);
    EXPECT_EQ(region["parents_out"], 2000);
  }
}

// Nested regions: sentences inside paragraphs, identity.
TEST_F(LineageCli, NestedRegionsRejoinToTheInput) {
  Py("corpus docs.jsonl 500 13");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph}\n  - expand: {name: s, by: sentence}\n"
         "  - expand: {name: c, by: \"chars:3\"}\n  - gather: {name: c}\n"
         "  - gather: {name: s}\n  - gather: {name: p, on_empty: keep_original}\n");
  ASSERT_EQ(RunRecipe("out.jsonl").exit_code, 0);
  EXPECT_TRUE(Read("out.jsonl") == Read("docs.jsonl"));
  const json regions = Stats("out.jsonl")["regions"];
  EXPECT_EQ(regions["s"]["parents_in"], regions["p"]["children_expanded"]);
  EXPECT_EQ(regions["c"]["parents_in"], regions["s"]["children_expanded"]);
}

// A filter inside regions filters children: every parent keeps exactly the
// fields it was read with, and gains no __dj__stats__ (SPEC-lineage §4).
TEST_F(LineageCli, AFilterInsideFourNestedRegionsLeavesTheRecordsAsRead) {
  Py("corpus docs.jsonl 300 17");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph}\n  - expand: {name: s, by: sentence}\n"
         "  - expand: {name: w, by: \"chars:7\"}\n  - expand: {name: c, by: \"chars:3\"}\n"
         "  - text_length_filter: {min_len: 0}\n"
         "  - gather: {name: c}\n  - gather: {name: w}\n"
         "  - gather: {name: s}\n  - gather: {name: p, on_empty: keep_original}\n");
  const CliResult r = RunRecipe("out.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out.jsonl").find("__dj__stats__"), std::string::npos);
  EXPECT_TRUE(Read("out.jsonl") == Read("docs.jsonl"));
}

// A failure in an inner region fails the outer parent too, and the input
// record gets one errors line (SPEC-lineage §5.4), with its bytes as read.
TEST_F(LineageCli, AFailureInANestedRegionIsOneErrorsLineForTheInputRecord) {
  const std::string bad = "{\"id\":1,\"text\":\"One. Two POISON.\\n\\nThree.\"}";
  Write("docs.jsonl", "{\"id\":0,\"text\":\"Fine. Also fine.\"}\n" + bad + "\n");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph}\n  - expand: {name: s, by: sentence}\n"
         "  - djshard_test_poison_mapper:\n  - gather: {name: s}\n  - gather: {name: p}\n");
  const CliResult r = RunRecipe("out.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out.jsonl"), "{\"id\":0,\"text\":\"Fine. Also fine.\"}\n");
  const std::vector<json> lines = ErrorLines("out.jsonl");
  ASSERT_EQ(lines.size(), 1u) << Read("out.jsonl.errors.jsonl");
  EXPECT_EQ(lines[0]["level"], "parent");
  EXPECT_EQ(lines[0]["record"].dump(), json::parse(bad).dump());
  const json regions = Stats("out.jsonl")["regions"];
  EXPECT_EQ(regions["p"]["parents_failed"], 1);
  EXPECT_EQ(regions["s"]["parents_failed"], 1);
}

// on_empty: keep_original writes the parent exactly as read, not as the
// operators before the expand left it.
TEST_F(LineageCli, KeepOriginalWritesTheParentAsRead) {
  const std::string row = "{\"text\":\"\\u3000\\u3000\",\"id\":1}\n";
  Write("docs.jsonl", row);
  Recipe("docs.jsonl",
         "  - whitespace_normalization_mapper:\n  - expand: {name: p, by: paragraph}\n"
         "  - gather: {name: p, on_empty: keep_original}\n");
  ASSERT_EQ(RunRecipe("out.jsonl").exit_code, 0);
  EXPECT_EQ(Read("out.jsonl"), row);
}

// §8.2
TEST_F(LineageCli, MisplacedPairsAndBadKeysFailAtLoadWithPosition) {
  Write("data.jsonl", "{\"text\": \"a\"}\n");
  struct Case {
    std::string body, position, what, extra;
  };
  const std::vector<Case> cases = {
      {"  - expand: {name: a, by: paragraph}\n  - expand: {name: b, by: sentence}\n"
       "  - gather: {name: a}\n  - gather: {name: b}\n",
       "recipe.yaml:6:5:", "crosses expand 'b'", ""},
      {"  - text_length_filter:\n  - gather: {name: a}\n", "recipe.yaml:5:5:", "has no open expand",
       ""},
      {"  - expand: {name: a, by: paragraph}\n  - text_length_filter:\n",
       "recipe.yaml:4:5:", "never closed", ""},
      {"  - expand: {name: a, by: paragraph}\n  - gather: {name: a}\n"
       "  - expand: {name: a, by: lines}\n  - gather: {name: a}\n",
       "recipe.yaml:6:5:", "used twice", ""},
      {"  - expand: {name: a, by: paragraph}\n  - expand: {name: b, by: paragraph}\n"
       "  - expand: {name: c, by: paragraph}\n  - expand: {name: d, by: paragraph}\n"
       "  - expand: {name: e, by: paragraph}\n  - gather: {name: e}\n  - gather: {name: d}\n"
       "  - gather: {name: c}\n  - gather: {name: b}\n  - gather: {name: a}\n",
       "recipe.yaml:8:5:", "5 deep", ""},
      {"  - expand: {name: a, by: paragraph}\n  - whitespace_normalization_mapper:\n"
       "  - gather: {name: a, into: stats, stats: [{from: text_len, op: mean, to: m}]}\n",
       "recipe.yaml:6:5:", "stats.from 'text_len'", ""},
      {"  - expand: {name: a, by: paragraph}\n  - whitespace_normalization_mapper:\n"
       "  - gather: {name: a}\n",
       "recipe.yaml:6:5:", "checkpoint.op_names",
       "checkpoint: {enabled: true, strategy: manual, op_names: [whitespace_normalization_mapper]}"
       "\n"},
      {"  - expand: {name: a, by: paragraph}\n  - gather: {name: a, into: field}\n",
       "recipe.yaml:5:5:", "into: field needs by: field:KEY", ""},
      {"  - expand: {name: a, by: words}\n  - gather: {name: a}\n", "recipe.yaml:4:27:", "words",
       ""},
      {"  - expand: {name: a, by: paragraph, bogus: 1}\n  - gather: {name: a}\n",
       "recipe.yaml:4:45:", "bogus", ""},
      {"  - expand: {name: a, by: paragraph}\n  - gather: {name: a, min_present_ratio: 2}\n",
       "recipe.yaml:5:42:", "min_present_ratio", ""},
      {"  - expand: {name: a, by: paragraph, batching_policy: single_parent}\n"
       "  - gather: {name: a}\n",
       "recipe.yaml:4:5:", "takes no batching_policy", ""},
      // A gather before its expand names both entries.
      {"  - gather: {name: a}\n  - expand: {name: a, by: paragraph}\n", "recipe.yaml:4:5:",
       "gather 'a' has no open expand: the expand 'a' at line 5:5 comes after it", ""},
      // Only Mappers and Filters run on children.
      {"  - expand: {name: a, by: paragraph}\n  - frequency_specified_field_selector:\n"
       "  - gather: {name: a}\n",
       "recipe.yaml:5:5:", "'frequency_specified_field_selector' inside region 'a' is a selector",
       ""},
      // Rule 5: an input column children do not carry.
      {"  - expand: {name: a, by: paragraph}\n"
       "  - text_length_filter: {input_columns: [text, source]}\n  - gather: {name: a}\n",
       "recipe.yaml:5:48:", "child records do not carry 'source'; add it to keep_fields", ""},
      {"  - expand: {name: a, by: \"field:images\", keep_fields: [id]}\n"
       "  - text_length_filter: {input_columns: [text]}\n  - gather: {name: a}\n",
       "recipe.yaml:5:42:", "child records do not carry 'text'", ""},
      // Rule 4: with every producer's output_columns declared, a list.from
      // none produces and no kept field holds.
      {"  - expand: {name: a, by: paragraph}\n"
       "  - text_length_filter: {output_columns: [__dj__stats__.text_len]}\n"
       "  - gather: {name: a, into: list, list: [{from: __dj__meta__.label, to: l}]}\n",
       "recipe.yaml:6:49:", "list.from '__dj__meta__.label' is not produced inside region 'a'", ""},
  };
  for (const Case& c : cases) {
    Write("recipe.yaml", "dataset_path: data.jsonl\nexport_path: job/out.jsonl\n" + c.extra +
                             "process:\n" + c.body);
    const CliResult r = RunDjshard({"run", "--config", "recipe.yaml"}, dir_);
    EXPECT_EQ(r.exit_code, 2) << c.body << r.err;
    EXPECT_NE(r.err.find("ERROR: " + c.position), std::string::npos) << c.body << r.err;
    EXPECT_NE(r.err.find(c.what), std::string::npos) << c.body << r.err;
    EXPECT_FALSE(Exists("job")) << c.body;
  }
}

// What children carry passes the contract checks: kept fields, the split
// field, their own stats and meta, earlier output_columns, and list paths
// whose producers declare no contract.
TEST_F(LineageCli, ContractsNamingWhatChildrenCarryLoad) {
  Write("data.jsonl", "{\"text\": \"a\\n\\nb\", \"source\": \"web\"}\n");
  const std::vector<std::string> bodies = {
      "  - expand: {name: a, by: paragraph, keep_fields: [source]}\n"
      "  - text_length_filter: {input_columns: [text, source.x, __dj__meta__.y]}\n"
      "  - gather: {name: a}\n",
      "  - expand: {name: a, by: paragraph}\n"
      "  - whitespace_normalization_mapper: {output_columns: [lang*]}\n"
      "  - text_length_filter: {input_columns: [language, __dj__stats__.z]}\n"
      "  - gather: {name: a}\n",
      "  - expand: {name: a, by: paragraph}\n  - whitespace_normalization_mapper:\n"
      "  - gather: {name: a, into: [text, list], list: [{from: __dj__meta__.label, to: l}]}\n",
      "  - expand: {name: a, by: paragraph, keep_fields: [source]}\n"
      "  - text_length_filter: {output_columns: [__dj__stats__.*]}\n"
      "  - gather: {name: a, into: [text, list], list: [{from: __dj__stats__.text_len, to: l},"
      " {from: source, to: s}, {from: text, to: t}]}\n",
  };
  for (const std::string& body : bodies) {
    Recipe("data.jsonl", body);
    const CliResult r = RunRecipe("out.jsonl");
    EXPECT_EQ(r.exit_code, 0) << body << r.err;
  }
}

// §5: a list path through a value that is not an object fails that parent
// with gather_error; a path absent in a child is null.
TEST_F(LineageCli, AListPathThroughANonObjectFailsTheParentWithGatherError) {
  const std::string bad = "{\"id\":1,\"text\":\"c\",\"m\":\"str\"}";
  Write("docs.jsonl", "{\"id\":0,\"text\":\"a\\n\\nb\",\"m\":{\"a\":1}}\n" + bad +
                          "\n{\"id\":2,\"text\":\"d\"}\n");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph, keep_fields: [m]}\n"
         "  - gather: {name: p, into: [text, list], list: [{from: m.a, to: l}]}\n");
  const CliResult r = RunRecipe("out.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out.jsonl"),
            "{\"id\":0,\"text\":\"a\\n\\nb\",\"m\":{\"a\":1},\"l\":[1,1]}\n"
            "{\"id\":2,\"text\":\"d\",\"l\":[null]}\n");
  const std::vector<json> errors = ErrorLines("out.jsonl");
  ASSERT_EQ(errors.size(), 1u) << Read("out.jsonl.errors.jsonl");
  EXPECT_EQ(errors[0]["error_type"], "gather_error");
  EXPECT_EQ(errors[0]["op"], "gather");
  EXPECT_EQ(errors[0]["level"], "parent");
  EXPECT_NE(errors[0]["message"].get<std::string>().find("'m', which is a string"),
            std::string::npos)
      << errors[0]["message"];
  EXPECT_EQ(errors[0]["record"].dump(), json::parse(bad).dump());
  EXPECT_EQ(Stats("out.jsonl")["regions"]["p"]["parents_failed"], 1);
}

// §8.3
TEST_F(LineageCli, ChildFilterAndMinPresentRatioMatchTheModel) {
  Py("paragraphs_corpus docs.jsonl 800 3");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph}\n  - text_length_filter: {min_len: 20}\n"
         "  - gather: {name: p, min_present_ratio: 0.5}\n",
         "keep_stats_in_res_ds: false\n");
  ASSERT_EQ(RunRecipe("out.jsonl").exit_code, 0);
  Py("child_filter docs.jsonl expected.jsonl 20 0.5");
  EXPECT_TRUE(Read("out.jsonl") == Read("expected.jsonl"));
  EXPECT_GT(Read("expected.jsonl").size(), 1000u);
}

// min_present_ratio compares the fraction PRESENT/total with the ratio: 7 of
// 25 children is 0.28 exactly, so a ratio of 0.28 keeps the parent.
TEST_F(LineageCli, MinPresentRatioKeepsAParentExactlyAtTheBound) {
  std::string text;
  for (int i = 0; i < 25; ++i) {
    if (!text.empty()) text += "\\n\\n";
    text += i < 7 ? "a paragraph long enough to stay " + std::to_string(i) : "short";
  }
  Write("docs.jsonl", "{\"text\":\"" + text + "\"}\n");
  for (const auto& [ratio, kept] :
       std::vector<std::pair<std::string, bool>>{{"0.28", true}, {"0.29", false}}) {
    Recipe("docs.jsonl",
           "  - expand: {name: p, by: paragraph}\n  - text_length_filter: {min_len: 20}\n"
           "  - gather: {name: p, min_present_ratio: " +
               ratio + "}\n",
           "keep_stats_in_res_ds: false\n");
    ASSERT_EQ(RunRecipe("out.jsonl").exit_code, 0) << ratio;
    EXPECT_EQ(Read("out.jsonl").empty(), !kept) << ratio << ": " << Read("out.jsonl");
  }
}

// A field filter's stat is named by its dotted field_key, and gather can read it.
TEST_F(LineageCli, GatherStatsReadAFieldFiltersStat) {
  Write("docs.jsonl", "{\"text\":\"a\\n\\nb\",\"meta\":{\"score\":3}}\n");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph, keep_fields: [meta]}\n"
         "  - specified_numeric_field_filter: {field_key: meta.score, min_value: 1, max_value: 5}\n"
         "  - gather: {name: p, into: [text, stats],"
         " stats: [{from: meta.score, op: mean, to: score_mean}]}\n",
         "");
  const CliResult r = RunRecipe("out.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Read("out.jsonl").find("\"score_mean\":3.0"), std::string::npos) << Read("out.jsonl");
}

// §8.4
TEST_F(LineageCli, GatheredStatsAndAllDroppedParentsMatchTheModel) {
  Py("paragraphs_corpus docs.jsonl 600 5");
  for (const auto& [extra, args] : std::vector<std::pair<std::string, std::string>>{
           {"min_present: 0\n      on_empty: keep\n", "0 keep"},
           {"", "1 drop"},
           {"min_present: 2\n      on_empty: keep_original\n", "2 keep_original"}}) {
    Recipe("docs.jsonl",
           "  - expand: {name: p, by: paragraph}\n  - text_length_filter: {min_len: 25}\n"
           "  - gather:\n      name: p\n      into: [text, stats]\n      stats:\n"
           "        - {from: text_len, op: mean, to: len_mean}\n"
           "        - {from: text_len, op: min, to: len_min}\n"
           "        - {from: text_len, op: max, to: len_max}\n"
           "        - {from: text_len, op: sum, to: len_sum}\n"
           "        - {from: text_len, op: count, to: len_count}\n      " +
               extra);
    ASSERT_EQ(RunRecipe("out.jsonl").exit_code, 0) << args;
    Py("child_stats docs.jsonl expected.jsonl 25 " + args);
    EXPECT_TRUE(Read("out.jsonl") == Read("expected.jsonl")) << args;
  }
}

// §8.5
TEST_F(LineageCli, FieldChildrenRebuildTheListWithoutDroppedEntries) {
  Py("images_corpus docs.jsonl 400 5");
  const std::string targets = Py("image_targets docs.jsonl .jpg .png");
  Recipe("docs.jsonl",
         "  - expand: {name: img, by: \"field:images\", keep_fields: [id]}\n"
         "  - specified_field_filter: {field_key: images, target_value: " +
             targets.substr(0, targets.size() - 1) +
             "}\n  - gather: {name: img, into: field, on_empty: keep_original}\n",
         "keep_stats_in_res_ds: false\n");
  ASSERT_EQ(RunRecipe("out.jsonl").exit_code, 0);
  Py("image_field docs.jsonl expected.jsonl .jpg .png");
  EXPECT_TRUE(Read("out.jsonl") == Read("expected.jsonl"));
}

// §8.6
TEST_F(LineageCli, OutputBytesDoNotDependOnThreadsOrCompletionOrder) {
  Py("paragraphs_corpus docs.jsonl 1500 9 40");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph}\n  - djshard_test_delay_mapper: {seed: 3, max_ms: "
         "0.3}\n  - text_length_filter: {min_len: 10}\n"
         "  - djshard_bench_model_op: {batch_size: 16, call_overhead_us: 0, item_us: 0}\n"
         "  - gather: {name: p, into: [text, list], list: [{from: __dj__meta__.bench_score, to: "
         "scores, keep_positions: true}]}\n");
  ASSERT_EQ(RunRecipe("one.jsonl", 1).exit_code, 0);
  ASSERT_EQ(RunRecipe("eight.jsonl", 8).exit_code, 0);
  EXPECT_TRUE(Read("one.jsonl") == Read("eight.jsonl"));
  EXPECT_TRUE(Read("one.jsonl.errors.jsonl") == Read("eight.jsonl.errors.jsonl"));
  EXPECT_EQ(Stats("one.jsonl")["regions"], Stats("eight.jsonl")["regions"]);
}

// §4: a model call mixes children of several reader batches; which siblings
// of a failing child shared its call (late_discarded) or never ran
// (suppressed) follows from the queue's canonical order, not from threads.
TEST_F(LineageCli, ChildFailuresInSharedModelCallsDoNotDependOnThreads) {
  Py("paragraphs_corpus docs.jsonl 2500 9 40");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph}\n"
         "  - djshard_bench_model_op: {batch_size: 16, call_overhead_us: 0, item_us: 0, "
         "fail_marker: POISON}\n  - gather: {name: p}\n");
  ASSERT_EQ(RunRecipe("one.jsonl", 1).exit_code, 0);
  ASSERT_EQ(RunRecipe("eight.jsonl", 8).exit_code, 0);
  EXPECT_TRUE(Read("one.jsonl") == Read("eight.jsonl"));
  EXPECT_TRUE(Read("one.jsonl.errors.jsonl") == Read("eight.jsonl.errors.jsonl"));
  EXPECT_EQ(Stats("one.jsonl")["regions"], Stats("eight.jsonl")["regions"]);
  EXPECT_GT(Stats("one.jsonl")["regions"]["p"]["parents_failed"].get<uint64_t>(), 0u);
  EXPECT_EQ(Stats("one.jsonl")["operators"][1]["calls"],
            Stats("eight.jsonl")["operators"][1]["calls"]);
}

// §3: max_inflight_parents / max_inflight_children run a batch's parents
// through the region in groups; the bytes do not change.
TEST_F(LineageCli, InflightLimitsGroupParentsWithoutChangingTheOutput) {
  Py("paragraphs_corpus docs.jsonl 700 21 30");
  const std::string rest =
      "  - djshard_test_poison_mapper:\n  - text_length_filter: {min_len: 15}\n"
      "  - djshard_bench_model_op: {batch_size: 8, call_overhead_us: 0, item_us: 0}\n"
      "  - gather: {name: p, into: [text, list, stats], list: [{from: __dj__meta__.bench_score, "
      "to: scores, keep_positions: true}], stats: [{from: text_len, op: sum, to: len}]}\n";
  Recipe("docs.jsonl", "  - expand: {name: p, by: paragraph}\n" + rest);
  ASSERT_EQ(RunRecipe("whole.jsonl").exit_code, 0);
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph, max_inflight_parents: 3, max_inflight_children: "
         "5}\n" +
             rest);
  ASSERT_EQ(RunRecipe("groups.jsonl").exit_code, 0);
  EXPECT_TRUE(Read("whole.jsonl") == Read("groups.jsonl"));
  EXPECT_TRUE(Read("whole.jsonl.errors.jsonl") == Read("groups.jsonl.errors.jsonl"));
  EXPECT_EQ(Stats("whole.jsonl")["regions"], Stats("groups.jsonl")["regions"]);
  EXPECT_EQ(ErrorLines("groups.jsonl").size(), 24u);
  // Smaller groups, more partial model calls.
  EXPECT_GT(Stats("groups.jsonl")["operators"][3]["calls"].get<uint64_t>(),
            Stats("whole.jsonl")["operators"][3]["calls"].get<uint64_t>());
}

// §8.7
TEST_F(LineageCli, PoisonedChildFailsOnlyItsParentAndSuppressesItsSiblings) {
  Py("paragraphs_corpus docs.jsonl 600 4 25");
  const std::string ops =
      "  - expand: {name: p, by: paragraph}\n"
      "  - djshard_bench_model_op: {batch_size: 32, call_overhead_us: 100, item_us: 10}\n"
      "  - gather: {name: p}\n";
  Recipe("docs.jsonl", ops);
  ASSERT_EQ(RunRecipe("clean.jsonl").exit_code, 0);
  Recipe("docs.jsonl", "  - expand: {name: p, by: paragraph}\n  - djshard_test_poison_mapper:\n" +
                           ops.substr(37));
  const CliResult r = RunRecipe("out.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> errors = ErrorLines("out.jsonl");
  ASSERT_EQ(errors.size(), 24u);  // ids 0, 25, ..., 575
  std::set<int> failed;
  uint64_t suppressed = 0;
  for (const json& e : errors) {
    EXPECT_EQ(e["error_type"], "op_error");
    EXPECT_EQ(e["level"], "parent");
    EXPECT_EQ(e["region"], "p");
    EXPECT_EQ(e["child_ordinal"], 0);
    EXPECT_EQ(e["op"], "djshard_test_poison_mapper");
    EXPECT_EQ(e["children_suppressed"].get<uint64_t>() + 1, e["children_total"].get<uint64_t>());
    EXPECT_EQ(e["source"]["line"].get<int>(), e["record"]["id"].get<int>() + 1);
    EXPECT_TRUE(failed.insert(e["record"]["id"].get<int>()).second) << "reported twice";
    suppressed += e["children_suppressed"].get<uint64_t>();
  }
  EXPECT_GT(suppressed, 0u);
  // Every other parent is exactly as in the run without poison.
  std::istringstream clean(Read("clean.jsonl")), out(Read("out.jsonl"));
  std::string a, b;
  size_t compared = 0;
  while (std::getline(clean, a)) {
    const int id = json::parse(a)["id"].get<int>();
    if (failed.count(id)) continue;
    ASSERT_TRUE(std::getline(out, b));
    EXPECT_EQ(a, b);
    ++compared;
  }
  EXPECT_FALSE(std::getline(out, b));
  EXPECT_EQ(compared, 576u);
  const json region = Stats("out.jsonl")["regions"]["p"];
  EXPECT_EQ(region["parents_failed"], 24);
  EXPECT_EQ(region["children_suppressed"].get<uint64_t>(), suppressed);
  // Every child ends in exactly one terminal count.
  EXPECT_EQ(region["children_present"].get<uint64_t>() +
                region["children_dropped"].get<uint64_t>() +
                region["children_failed"].get<uint64_t>() + suppressed +
                region["late_discarded"].get<uint64_t>(),
            region["children_expanded"].get<uint64_t>());
  EXPECT_EQ(region["children_failed"], 24);
}

// §5: a model call that raises is bisected down to the child it fails on.
TEST_F(LineageCli, ARaisingModelCallIsBisectedToTheFailingChild) {
  Py("paragraphs_corpus docs.jsonl 400 4 20");
  const std::string op =
      "  - djshard_bench_model_op: {batch_size: 16, call_overhead_us: 0, item_us: 0, "
      "raise_marker: POISON, raise_type: oom";
  Recipe("docs.jsonl", "  - expand: {name: p, by: paragraph}\n" + op +
                           ", fail_marker: NEVER}\n  - gather: {name: p}\n");
  ASSERT_EQ(RunRecipe("out.jsonl").exit_code, 0);
  const std::vector<json> errors = ErrorLines("out.jsonl");
  ASSERT_EQ(errors.size(), 20u);
  std::set<int> failed;
  for (const json& e : errors) {
    EXPECT_EQ(e["error_type"], "oom");
    EXPECT_EQ(e["child_ordinal"], 0);
    failed.insert(e["record"]["id"].get<int>());
  }
  // The others are exactly what a model that never raises writes.
  Recipe("docs.jsonl", "  - expand: {name: p, by: paragraph}\n" +
                           op.substr(0, op.find(", raise_marker")) + "}\n  - gather: {name: p}\n");
  ASSERT_EQ(RunRecipe("clean.jsonl").exit_code, 0);
  std::istringstream clean(Read("clean.jsonl")), out(Read("out.jsonl"));
  std::string a, b;
  while (std::getline(clean, a)) {
    if (failed.count(json::parse(a)["id"].get<int>())) continue;
    ASSERT_TRUE(std::getline(out, b));
    EXPECT_EQ(a, b);
  }
  // Without isolation calls every row of a raising call fails with isolation_budget.
  Recipe("docs.jsonl", "  - expand: {name: p, by: paragraph}\n" + op +
                           ", max_isolation_calls: 0}\n  - gather: {name: p}\n");
  ASSERT_EQ(RunRecipe("budget.jsonl").exit_code, 0);
  const std::vector<json> budget = ErrorLines("budget.jsonl");
  EXPECT_GT(budget.size(), 20u);
  for (const json& e : budget) EXPECT_EQ(e["error_type"], "isolation_budget");
}

// §3, §5: a failed parent's siblings that ran (in the failing call, or
// through the region's last operator) are late_discarded; those still
// waiting for an operator are SUPPRESSED.
TEST_F(LineageCli, SiblingsThatRanAreLateDiscardedAndThoseWaitingSuppressed) {
  Write("six.jsonl", "{\"id\": 1, \"text\": \"s0. s1. s2. BAD3. s4. s5.\"}\n");
  const std::string model =
      "  - djshard_bench_model_op: {batch_size: 2, call_overhead_us: 0, item_us: 0, "
      "raise_marker: BAD}\n";
  struct Case {
    std::string after;  // operators after the model op, inside the region
    size_t suppressed, late;
  };
  // Calls [s0 s1], [s2 BAD3] (raises; bisected to BAD3), then s4 and s5
  // would be next. With nothing after the model op, s0..s2 are done; with a
  // filter after it, s0 and s1 still wait for the filter.
  for (const Case& c : {Case{"", 2, 3}, Case{"  - text_length_filter: {min_len: 0}\n", 4, 1}}) {
    Recipe("six.jsonl",
           "  - expand: {name: p, by: sentence}\n" + model + c.after + "  - gather: {name: p}\n");
    ASSERT_EQ(RunRecipe("out.jsonl").exit_code, 0) << c.after;
    const std::vector<json> errors = ErrorLines("out.jsonl");
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0]["child_ordinal"], 3);
    EXPECT_EQ(errors[0]["children_total"], 6);
    EXPECT_EQ(errors[0]["children_suppressed"], c.suppressed) << c.after;
    EXPECT_EQ(errors[0]["children_completed"], c.late) << c.after;
    const json region = Stats("out.jsonl")["regions"]["p"];
    EXPECT_EQ(region["children_suppressed"], c.suppressed) << c.after;
    EXPECT_EQ(region["late_discarded"], c.late) << c.after;
    EXPECT_EQ(region["children_failed"], 1);
    EXPECT_EQ(Read("out.jsonl"), "");
  }
}

// Nested regions: a paragraph whose sentence failed fails its record once
// (the other paragraphs, through the inner region already, are
// late_discarded), and a paragraph its sentence gather dropped is DROPPED
// for the outer gather.
TEST_F(LineageCli, NestedRegionsCountEachChildOnceAndDropDroppedInnerParents) {
  Write("n.jsonl", "{\"id\": 1, \"text\": \"a one. BAD two.\\n\\nb one. BAD two.\\n\\nc one.\"}\n");
  Recipe("n.jsonl",
         "  - expand: {name: para, by: paragraph}\n  - expand: {name: sent, by: sentence}\n"
         "  - djshard_test_poison_mapper: {marker: BAD}\n  - gather: {name: sent}\n"
         "  - gather: {name: para}\n",
         "skip_op_error: true\n");
  ASSERT_EQ(RunRecipe("failed.jsonl").exit_code, 0);
  const json para = Stats("failed.jsonl")["regions"]["para"];
  EXPECT_EQ(para["children_expanded"], 3);
  EXPECT_EQ(para["children_failed"], 1);
  EXPECT_EQ(para["late_discarded"], 2);
  EXPECT_EQ(para["children_suppressed"], 0);
  const std::vector<json> errors = ErrorLines("failed.jsonl");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]["children_completed"], 2);
  EXPECT_EQ(Read("failed.jsonl"), "");

  Write("d.jsonl", "{\"id\": 1, \"text\": \"long sentence one.\\n\\nab.\\n\\nlast sentence.\"}\n");
  Recipe("d.jsonl",
         "  - expand: {name: para, by: paragraph}\n  - expand: {name: sent, by: sentence}\n"
         "  - text_length_filter: {min_len: 5}\n  - gather: {name: sent}\n"
         "  - gather: {name: para}\n");
  ASSERT_EQ(RunRecipe("dropped.jsonl").exit_code, 0);
  EXPECT_EQ(json::parse(Read("dropped.jsonl"))["text"], "long sentence one.\n\nlast sentence.");
  const json dropped = Stats("dropped.jsonl")["regions"]["para"];
  EXPECT_EQ(dropped["children_dropped"], 1);
  EXPECT_EQ(dropped["children_present"], 2);
}

// A model row failing with skip_op_error: false stops the run with its
// error while other calls are still running (eight threads, a parent-level
// model operator with several calls at once), and leaves no output behind.
TEST_F(LineageCli, AFailureWhileModelCallsRunStopsTheRunCleanly) {
  std::string rows;
  for (int i = 0; i < 400; ++i) {
    std::string text = "row ";
    text += std::to_string(i);
    if (i == 150) text += " POISON";
    text.append(i == 150 ? 60 : 40 + i % 30, 'y');
    rows += json({{"id", i}, {"text", text}}).dump() + "\n";
  }
  Write("in.jsonl", rows);
  Recipe("in.jsonl",
         "  - djshard_test_delay_mapper: {seed: 3, max_ms: 0.5}\n"
         "  - text_length_filter: {min_len: 60}\n"
         "  - djshard_bench_model_op: {batch_size: 8, call_overhead_us: 20000, item_us: 0, "
         "fail_marker: POISON, skip_op_error: false}\n");
  for (int round = 0; round < 3; ++round) {
    const CliResult r = RunRecipe("out.jsonl", 8);
    ASSERT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("in.jsonl:151: operator 'djshard_bench_model_op' failed"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(Exists("out.jsonl"));
  }
  for (const std::string& name : List()) EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
}

// §8.8
TEST_F(LineageCli, AChildFailureStopsTheRunWhenSkipOpErrorIsFalse) {
  Py("paragraphs_corpus docs.jsonl 20 4 7");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph}\n  - djshard_test_poison_mapper:\n"
         "      skip_op_error: false\n  - gather: {name: p}\n");
  const CliResult r = RunRecipe("out.jsonl");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("docs.jsonl:1: operator 'djshard_test_poison_mapper' failed"),
            std::string::npos)
      << r.err;
}

// §8.9
TEST_F(LineageCli, DropChildKeepsTheParentWithoutTheFailingChild) {
  Py("paragraphs_corpus docs.jsonl 300 8 10");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph}\n  - djshard_test_poison_mapper:\n"
         "  - gather: {name: p, on_child_error: drop_child}\n");
  ASSERT_EQ(RunRecipe("out.jsonl").exit_code, 0);
  Py("drop_child docs.jsonl expected.jsonl POISON");
  EXPECT_TRUE(Read("out.jsonl") == Read("expected.jsonl"));
  const std::vector<json> errors = ErrorLines("out.jsonl");
  ASSERT_EQ(errors.size(), 30u);
  for (const json& e : errors) {
    EXPECT_EQ(e["level"], "child");
    EXPECT_EQ(e["child_ordinal"], 0);
    EXPECT_NE(e["child_record"]["text"].get<std::string>().find("POISON"), std::string::npos);
  }
}

// §8.10
TEST_F(LineageCli, TooManyChildrenFailTheParentWithExpandLimit) {
  Py("paragraphs_corpus docs.jsonl 200 6");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph, max_children: 10}\n  - gather: {name: p}\n");
  ASSERT_EQ(RunRecipe("out.jsonl").exit_code, 0);
  const std::vector<json> errors = ErrorLines("out.jsonl");
  const json region = Stats("out.jsonl")["regions"]["p"];
  ASSERT_GT(errors.size(), 0u);
  EXPECT_EQ(region["parents_failed"].get<size_t>(), errors.size());
  for (const json& e : errors) {
    EXPECT_EQ(e["error_type"], "expand_limit");
    EXPECT_EQ(e["op"], "expand");
  }
  // A 50 MB parent split by chars:1 stops at max_children + 1 pieces.
  Py("huge_parent huge.jsonl 50");
  Recipe("huge.jsonl", "  - expand: {name: c, by: \"chars:1\"}\n  - gather: {name: c}\n");
  const CliResult r = RunDjshard(
      {"run", "--config", "recipe.yaml", "--threads", "2", "--export-path", "huge_out.jsonl"},
      dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> huge = ErrorLines("huge_out.jsonl");
  ASSERT_EQ(huge.size(), 1u);
  EXPECT_EQ(huge[0]["error_type"], "expand_limit");
  EXPECT_LT(r.peak_rss_kb, 300 * 1024) << "peak RSS " << r.peak_rss_kb << " KB";
  EXPECT_EQ(Read("huge_out.jsonl"), "{\"id\": 1, \"text\": \"small one\"}\n");
  // So does a list of 6M elements split by field:KEY. What reading such a
  // line costs is measured apart, by a run splitting a field no record has.
  Py("huge_array array.jsonl 12");
  const std::vector<std::string> array_run = {"run", "--config",      "recipe.yaml", "--threads",
                                              "2",   "--export-path", "out.jsonl"};
  Recipe("array.jsonl", "  - expand: {name: f, by: \"field:absent\"}\n  - gather: {name: f}\n");
  const CliResult read = RunDjshard(array_run, dir_);
  ASSERT_EQ(read.exit_code, 0) << read.err;
  Recipe("array.jsonl", "  - expand: {name: f, by: \"field:images\"}\n  - gather: {name: f}\n");
  const CliResult split = RunDjshard(array_run, dir_);
  ASSERT_EQ(split.exit_code, 0) << split.err;
  const std::vector<json> array_errors = ErrorLines("out.jsonl");
  ASSERT_EQ(array_errors.size(), 1u);
  EXPECT_EQ(array_errors[0]["error_type"], "expand_limit");
  EXPECT_EQ(Read("out.jsonl"), "{\"id\": 1, \"images\": [\"a.jpg\"]}\n");
  EXPECT_LT(split.peak_rss_kb, 300 * 1024) << "peak RSS " << split.peak_rss_kb << " KB";
  EXPECT_LT(split.peak_rss_kb - read.peak_rss_kb, 40 * 1024)
      << "splitting took " << split.peak_rss_kb << " KB, reading alone " << read.peak_rss_kb
      << " KB";
}

// §8.11
TEST_F(LineageCli, ModelCallsBatchChildrenOfManyParents) {
  const json w1 = json::parse(Py("w1_corpus w1.jsonl 3000 7 64"));
  const uint64_t children = w1["children"];
  for (const char* policy : {"any_parent", "single_parent"}) {
    Recipe("w1.jsonl",
           std::string("  - expand: {name: p, by: paragraph}\n"
                       "  - djshard_bench_model_op: {batch_size: 64, call_overhead_us: 0, "
                       "item_us: 0, batching_policy: ") +
               policy + "}\n  - gather: {name: p}\n");
    ASSERT_EQ(RunRecipe("out.jsonl").exit_code, 0);
    EXPECT_TRUE(Read("out.jsonl") == Read("w1.jsonl")) << policy;
    const json stats = Stats("out.jsonl");
    const json op = stats["operators"][1];
    EXPECT_EQ(op["items"].get<uint64_t>(), children);
    const uint64_t calls = op["calls"];
    if (std::string(policy) == "single_parent") {
      EXPECT_EQ(calls, w1["single_parent_calls_64"].get<uint64_t>());
      continue;
    }
    // The ready queue spans the reader batches (the input is several): only
    // the run's last call is partial.
    ASSERT_GT(std::filesystem::file_size(Path("w1.jsonl")), 512u << 10);
    EXPECT_EQ(calls, (children + 63) / 64);
    EXPECT_GE(op["mean_batch_fill"].get<double>(), 0.95 * 64);
    // So with any thread count.
    ASSERT_EQ(RunRecipe("eight.jsonl", 8).exit_code, 0);
    EXPECT_TRUE(Read("eight.jsonl") == Read("w1.jsonl"));
    EXPECT_EQ(Stats("eight.jsonl")["operators"][1]["calls"].get<uint64_t>(), calls);
  }
}

// §4: a model operator at parent level has the same ready queue, so rows of
// many reader batches share its calls (here a filter before it leaves about
// half of each reader batch of batch_size rows).
TEST_F(LineageCli, ParentLevelModelCallsTakeRowsOfManyReaderBatches) {
  std::string rows;
  size_t survivors = 0, failing = 0;
  for (int i = 0; i < 3000; ++i) {
    const bool kept = i % 2 == 0 || i % 7 == 0;
    const bool fails = kept && i % 97 == 0;
    std::string text = "row ";
    text += std::to_string(i);
    if (fails) text += " FAILME";
    text.append(kept ? 30 : 2, 'x');
    rows += json({{"id", i}, {"text", text}}).dump() + "\n";
    survivors += kept ? 1 : 0;
    failing += fails ? 1 : 0;
  }
  Write("rows.jsonl", rows);
  Recipe("rows.jsonl",
         "  - text_length_filter: {min_len: 20}\n"
         "  - djshard_bench_model_op: {batch_size: 64, call_overhead_us: 0, item_us: 0, "
         "fail_marker: FAILME}\n",
         "skip_op_error: true\n");
  ASSERT_EQ(RunRecipe("two.jsonl").exit_code, 0);
  const json op = Stats("two.jsonl")["operators"][1];
  EXPECT_EQ(op["items"].get<size_t>(), survivors);
  EXPECT_EQ(op["calls"].get<size_t>(), (survivors + 63) / 64);
  EXPECT_GE(op["mean_batch_fill"].get<double>(), 0.95 * 64);
  EXPECT_EQ(op["errors"].get<size_t>(), failing);
  const std::vector<json> errors = ErrorLines("two.jsonl");
  ASSERT_EQ(errors.size(), failing);
  for (size_t j = 1; j < errors.size(); ++j) {
    EXPECT_LT(errors[j - 1]["line"].get<uint64_t>(), errors[j]["line"].get<uint64_t>());
  }
  // Output, errors and calls are the same with one thread and with eight.
  for (const std::string threads : {"1", "8"}) {
    const std::string out = "t" + threads + ".jsonl";
    ASSERT_EQ(RunRecipe(out, std::stoi(threads)).exit_code, 0);
    EXPECT_TRUE(Read(out) == Read("two.jsonl")) << threads;
    EXPECT_TRUE(Read(out + ".errors.jsonl") == Read("two.jsonl.errors.jsonl")) << threads;
    EXPECT_EQ(Stats(out)["operators"][1]["calls"], op["calls"]) << threads;
  }
  const std::string written = Read("two.jsonl");
  EXPECT_EQ(std::count(written.begin(), written.end(), '\n'),
            static_cast<std::ptrdiff_t>(survivors - failing));
  // A partitioned job reports its model calls too: the partitions' sum.
  Recipe("rows.jsonl",
         "  - text_length_filter: {min_len: 20}\n"
         "  - djshard_bench_model_op: {batch_size: 64, call_overhead_us: 0, item_us: 0, "
         "fail_marker: FAILME}\n",
         "skip_op_error: true\npartition: {mode: manual, num_of_partitions: 3}\n");
  ASSERT_EQ(RunRecipe("job.jsonl").exit_code, 0);
  EXPECT_TRUE(Read("job.jsonl") == written);
  const json job_op = Stats("job.jsonl")["operators"][1];
  EXPECT_EQ(job_op["items"].get<size_t>(), survivors);
  EXPECT_GE(job_op["calls"].get<size_t>(), (survivors + 63) / 64);
  EXPECT_LE(job_op["calls"].get<size_t>(), (survivors + 63) / 64 + 2);
  // A model operator that no row reaches still reports its calls (none).
  Recipe("rows.jsonl",
         "  - text_length_filter: {min_len: 100000}\n"
         "  - djshard_bench_model_op: {batch_size: 64, call_overhead_us: 0, item_us: 0}\n");
  ASSERT_EQ(RunRecipe("none.jsonl").exit_code, 0);
  const json idle = Stats("none.jsonl")["operators"][1];
  EXPECT_EQ(idle["calls"], 0);
  EXPECT_EQ(idle["items"], 0);
  EXPECT_EQ(idle["mean_batch_fill"], 0.0);
  EXPECT_FALSE(Stats("none.jsonl")["operators"][0].contains("calls"));
}

// Elastic workers run the same executor: same bytes as `djshard run`.
TEST_F(LineageCli, ElasticWorkersWriteTheSameBytesAsRun) {
  Py("paragraphs_corpus docs.jsonl 900 12 50");
  Recipe("docs.jsonl",
         "  - expand: {name: p, by: paragraph}\n  - djshard_test_poison_mapper:\n"
         "  - text_length_filter: {min_len: 12}\n"
         "  - djshard_bench_model_op: {batch_size: 16, call_overhead_us: 0, item_us: 0}\n"
         "  - gather: {name: p, into: [text, list], list: [{from: __dj__meta__.bench_score, to: "
         "scores}]}\n");
  ASSERT_EQ(RunRecipe("run.jsonl").exit_code, 0);
  CliResult r = WaitFor(Spawn(
      {"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "4"}, kTestOps));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = WaitFor(Spawn({"worker", "--job-dir", "job", "--threads", "2"}, kTestOps));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Run({"merge", "--job-dir", "job", "--output", "merged.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Read("merged.jsonl") == Read("run.jsonl"));
  // The same failed parents, each once, from the shards' errors files.
  std::multiset<int> run_failed, merged_failed;
  for (const json& e : ErrorLines("run.jsonl")) run_failed.insert(e["record"]["id"].get<int>());
  for (const json& e : ErrorLines("merged.jsonl")) {
    merged_failed.insert(e["record"]["id"].get<int>());
  }
  EXPECT_EQ(run_failed.size(), 18u);
  EXPECT_EQ(merged_failed, run_failed);
  // Each shard's done record counts its regions; together they are the run's.
  uint64_t parents_failed = 0, children = 0;
  for (const std::string& name : List("job/state/done")) {
    const json done = json::parse(Read("job/state/done/" + name));
    parents_failed += done["regions"]["p"]["parents_failed"].get<uint64_t>();
    children += done["regions"]["p"]["children_expanded"].get<uint64_t>();
  }
  EXPECT_EQ(parents_failed, 18u);
  EXPECT_EQ(children, Stats("run.jsonl")["regions"]["p"]["children_expanded"].get<uint64_t>());
  for (const json& e : ErrorLines("merged.jsonl")) {
    EXPECT_TRUE(e["source"]["shard_id"].get<std::string>().starts_with("part-")) << e["source"];
    EXPECT_TRUE(e["source"]["row"].is_number_unsigned()) << e["source"];
  }
}

// §8.12, durable lineage. `rows` parents of plain ASCII text: short ones
// (under 6 characters) that the filter before the region drops, longer ones
// (15 to 89) that the region splits into chars:7 children.
class DurableLineageCli : public LineageCli {
 protected:
  void WriteDurableCorpus(int rows) {
    std::string docs;
    for (int i = 0; i < rows; ++i) {
      docs += "{\"id\":" + std::to_string(i) + ",\"text\":\"" + TextOf(i) + "\"}\n";
    }
    Write("docs.jsonl", docs);
  }
  static std::string TextOf(int i) {
    const int len = i % 5 == 0 ? i % 6 : 15 + (i * 37) % 75;
    std::string t;
    for (int k = 0; k < len; ++k) {
      t += (k % 6 == 5 && k + 1 < len) ? ' ' : static_cast<char>('a' + (i + k) % 26);
    }
    return t;
  }
  // Children of parent i: its text in runs of 7 code points, none when the
  // filter before the region drops it (independent of djshard).
  static uint64_t ChildrenOf(int i) {
    const size_t len = TextOf(i).size();
    return len < 10 ? 0 : (len + 6) / 7;
  }
  void WriteDurableRecipe(const std::string& extra = "") {
    Recipe("docs.jsonl",
           "  - text_length_filter: {min_len: 10}\n"
           "  - expand: {name: p, by: \"chars:7\", max_inflight_parents: 4}\n"
           "  - djshard_test_delay_mapper: {seed: 5, max_ms: 1}\n"
           "  - djshard_test_poison_mapper: {marker: xyz}\n"
           "  - text_length_filter: {min_len: 4}\n"
           "  - gather: {name: p, journal_flush_parents: 4}\n"
           "  - whitespace_normalization_mapper:\n",
           "work_dir: work\npartition: {mode: manual, num_of_partitions: 2, "
           "max_concurrent_partitions: 1}\n" +
               extra);
  }
  CliResult RunJob(const std::vector<std::string>& more, const std::vector<std::string>& env = {}) {
    std::vector<std::string> args = {"run", "--config",      "recipe.yaml", "--threads",
                                     "1",   "--export-path", "out.jsonl"};
    args.insert(args.end(), more.begin(), more.end());
    std::vector<std::string> e = kTestOps;
    e.insert(e.end(), env.begin(), env.end());
    return WaitFor(Spawn(args, e));
  }
  // The committed segments of job `job`: commit record name -> partition-relative rows.
  std::map<std::string, std::vector<uint64_t>> Segments(const std::string& job) const {
    std::map<std::string, std::vector<uint64_t>> out;
    const std::string dir = "work/" + job + "/checkpoints";
    for (const std::string& n : List(dir)) {
      if (n.rfind("lineage_p_partition_", 0) != 0 || n.find(".commit.json") == std::string::npos) {
        continue;
      }
      const json c = json::parse(Read(dir + "/" + n));
      EXPECT_EQ(c["count"].get<size_t>(), c["rows"].size());
      out[n] = c["rows"].get<std::vector<uint64_t>>();
    }
    return out;
  }
  // Input rows (0-based) of the parents in `segments`, from the partition bounds.
  std::set<int> JournaledRows(const std::string& job,
                              const std::map<std::string, std::vector<uint64_t>>& segments) const {
    const json info = json::parse(Read("work/" + job + "/checkpoints/partitioning_info.json"));
    std::set<int> rows;
    for (const auto& [name, list] : segments) {
      const json c = json::parse(Read("work/" + job + "/checkpoints/" + name));
      const uint64_t start =
          info["partitions"][c["partition_id"].get<size_t>()]["start_row"].get<uint64_t>();
      for (const uint64_t r : list) rows.insert(static_cast<int>(start + r));
    }
    return rows;
  }
  uint64_t ChildrenOfAllBut(int rows, const std::set<int>& journaled) const {
    uint64_t n = 0;
    for (int i = 0; i < rows; ++i) n += journaled.count(i) ? 0 : ChildrenOf(i);
    return n;
  }
};

TEST_F(DurableLineageCli, KilledRunResumesFromTheGatherJournalWithTheSameBytes) {
  const int rows = 60;
  WriteDurableCorpus(rows);
  WriteDurableRecipe();
  ASSERT_EQ(RunJob({"--job_id", "ref"}).exit_code, 0);
  const std::string reference = Read("out.jsonl");
  const std::string reference_errors = Read("out.jsonl.errors.jsonl");
  EXPECT_GE(ErrorLines("out.jsonl").size(), 3u);
  uint64_t all = 0;
  for (int i = 0; i < rows; ++i) all += ChildrenOf(i);
  EXPECT_EQ(Stats("out.jsonl")["regions"]["p"]["children_expanded"], all);
  EXPECT_EQ(Stats("out.jsonl")["regions"]["p"]["parents_from_journal"], 0);
  // The reference's journals went once its final taps committed.
  EXPECT_TRUE(Segments("ref").empty());

  // Partition 0 (24 parents past the filter, in segments of 4) finishes;
  // partition 1 is killed after its second segment.
  const CliResult killed =
      RunJob({"--job_id", "j"}, {"DJSHARD_TEST_KILL_AT=lineage_segment_committed@8"});
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  const auto segments = Segments("j");
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments.begin()->first.rfind("lineage_p_partition_00001.", 0), 0u);
  EXPECT_TRUE(Exists("work/j/checkpoints/checkpoint_op_0006_partition_00000.commit.json"));
  const std::set<int> journaled = JournaledRows("j", segments);
  EXPECT_GE(journaled.size(), 8u);

  const CliResult resumed = RunJob({"--resume", "j"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(Read("out.jsonl") == reference);
  // Failed parents from the journal keep their errors lines, in their place.
  EXPECT_TRUE(Read("out.jsonl.errors.jsonl") == reference_errors);
  // Partition 0's counters come from its final tap's commit.
  const json region = Stats("out.jsonl")["regions"]["p"];
  EXPECT_EQ(region["parents_in"], 48);
  EXPECT_EQ(region["parents_from_journal"].get<size_t>(), journaled.size());
  EXPECT_EQ(region["children_expanded"].get<uint64_t>(), ChildrenOfAllBut(rows, journaled));
  // lineage_load events name every committed segment; the journals are gone.
  size_t loads = 0;
  for (const std::string& n : List("work/j")) {
    if (n.rfind("events_", 0) != 0) continue;
    std::istringstream in(Read("work/j/" + n));
    for (std::string line; std::getline(in, line);) {
      loads += json::parse(line)["event_type"] == "lineage_load";
    }
  }
  EXPECT_EQ(loads, segments.size());
  EXPECT_TRUE(Segments("j").empty());
}

TEST_F(DurableLineageCli, APartitionResumedFromATapAfterItsRegionLeavesNoJournal) {
  WriteDurableCorpus(60);
  WriteDurableRecipe("checkpoint: {strategy: every_op}\n");
  ASSERT_EQ(RunJob({"--job_id", "ref"}).exit_code, 0);
  const std::string reference = Read("out.jsonl");
  // Partition 0 committed its taps after op 0 and after the gather, not its
  // final tap: it resumes from the gather's tap, past the region.
  const CliResult killed = RunJob({"--job_id", "j"}, {"DJSHARD_TEST_KILL_AT=tap_committed@2"});
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  ASSERT_FALSE(Segments("j").empty());
  const CliResult resumed = RunJob({"--resume", "j"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(Read("out.jsonl") == reference);
  for (const std::string& n : List("work/j/checkpoints")) {
    EXPECT_NE(n.rfind("lineage_", 0), 0u) << n << " outlived its partition's final tap";
  }
}

TEST_F(DurableLineageCli, CorruptedJournalSegmentIsRejectedAndItsParentsRecomputed) {
  const int rows = 60;
  WriteDurableCorpus(rows);
  WriteDurableRecipe();
  ASSERT_EQ(RunJob({"--job_id", "ref"}).exit_code, 0);
  const std::string reference = Read("out.jsonl");
  const CliResult killed =
      RunJob({"--job_id", "j"}, {"DJSHARD_TEST_KILL_AT=lineage_segment_committed@3"});
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  auto segments = Segments("j");
  ASSERT_GE(segments.size(), 3u);
  // One byte of the first segment's data changes.
  const std::string bad = segments.begin()->first;
  const json record = json::parse(Read("work/j/checkpoints/" + bad));
  const std::string data = "work/j/checkpoints/" + record["data_path"].get<std::string>();
  std::string bytes = Read(data);
  bytes[bytes.size() / 2] ^= 0x20;
  Write(data, bytes);
  segments.erase(segments.begin());
  const std::set<int> journaled = JournaledRows("j", segments);

  const CliResult resumed = RunJob({"--resume", "j"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(Read("out.jsonl") == reference);
  const json region = Stats("out.jsonl")["regions"]["p"];
  EXPECT_EQ(region["parents_from_journal"].get<size_t>(), journaled.size());
  EXPECT_EQ(region["children_expanded"].get<uint64_t>(), ChildrenOfAllBut(rows, journaled));
  EXPECT_TRUE(Exists("work/j/checkpoints/rejected/" + record["data_path"].get<std::string>()));
  bool logged = false;
  for (const std::string& n : List("work/j")) {
    if (n.rfind("events_", 0) != 0) continue;
    std::istringstream in(Read("work/j/" + n));
    for (std::string line; std::getline(in, line);) {
      const json e = json::parse(line);
      if (e["event_type"] == "checkpoint_rejected") {
        logged = true;
        EXPECT_NE(e["error_message"].get<std::string>().find("xxh3_128 differs"), std::string::npos)
            << e;
      }
    }
  }
  EXPECT_TRUE(logged);
}

// The journal keys are checked at load, like the gather's others.
TEST_F(DurableLineageCli, JournalKeysAreCheckedAtLoad) {
  WriteDurableCorpus(5);
  for (const std::string& bad :
       {std::string("journal_flush_parents: 0"), std::string("journal_flush_secs: -1")}) {
    Recipe("docs.jsonl",
           "  - expand: {name: p, by: lines}\n  - gather:\n      name: p\n      " + bad + "\n");
    const CliResult r = RunRecipe("out.jsonl");
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("recipe.yaml:6:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(bad.substr(0, bad.find(':'))), std::string::npos) << r.err;
  }
  Recipe("docs.jsonl", "  - expand: {name: a/b, by: lines}\n  - gather: {name: a/b}\n");
  const CliResult r = RunRecipe("out.jsonl");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("character other than"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace djshard::testing
