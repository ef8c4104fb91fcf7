#include "etcdw/common/flags.h"

#include <gtest/gtest.h>

namespace etcdw::common {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using Outcome = FlagSet::Outcome;
using Args = std::vector<std::string>;

// The flags gardener's etcd-backup-restore style commands use, in miniature.
struct Flags {
  FlagSet fs{"prog"};
  std::string name;
  int64_t count = 0;
  bool verbose = false;
  std::chrono::milliseconds period{0};
  Flags() {
    fs.String("name", &name, "etcd", "member name");
    fs.Int("count", &count, 3, "how many");
    fs.Bool("verbose", &verbose, false, "log more");
    fs.Duration("period", &period, seconds(30), "how often");
  }
};

TEST(FlagsTest, DefaultsAreAppliedAtRegistration) {
  Flags f;
  EXPECT_EQ(f.name, "etcd");
  EXPECT_EQ(f.count, 3);
  EXPECT_FALSE(f.verbose);
  EXPECT_EQ(f.period, seconds(30));
  auto r = f.fs.Parse({});
  EXPECT_EQ(r.outcome, Outcome::kOk);
  EXPECT_TRUE(r.positional.empty());
  EXPECT_FALSE(f.fs.IsSet("name"));
}

TEST(FlagsTest, OneOrTwoDashesWithSeparateOrAttachedValues) {
  for (const Args& args :
       {Args{"-name", "x"}, Args{"--name", "x"}, Args{"-name=x"}, Args{"--name=x"}}) {
    Flags f;
    auto r = f.fs.Parse(args);
    ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
    EXPECT_EQ(f.name, "x") << args[0];
    EXPECT_TRUE(f.fs.IsSet("name"));
    EXPECT_FALSE(f.fs.IsSet("count"));
  }
}

TEST(FlagsTest, AttachedValueMayBeEmptyOrContainEquals) {
  Flags f;
  auto r = f.fs.Parse({"-name=", "--count=7"});
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  EXPECT_EQ(f.name, "");
  EXPECT_EQ(f.count, 7);
  Flags g;
  ASSERT_EQ(g.fs.Parse({"-name=a=b"}).outcome, Outcome::kOk);
  EXPECT_EQ(g.name, "a=b");
}

TEST(FlagsTest, SeparateValueIsTakenEvenIfItLooksLikeAFlag) {
  Flags f;
  auto r = f.fs.Parse({"-name", "-verbose"});
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  EXPECT_EQ(f.name, "-verbose");
  EXPECT_FALSE(f.verbose);
}

TEST(FlagsTest, LastOccurrenceWins) {
  Flags f;
  ASSERT_EQ(f.fs.Parse({"-count", "1", "-count=2"}).outcome, Outcome::kOk);
  EXPECT_EQ(f.count, 2);
}

TEST(FlagsTest, Bools) {
  Flags f;
  ASSERT_EQ(f.fs.Parse({"-verbose"}).outcome, Outcome::kOk);
  EXPECT_TRUE(f.verbose);
  for (const char* v : {"1", "t", "T", "true", "TRUE", "True"}) {
    Flags g;
    ASSERT_EQ(g.fs.Parse({std::string("--verbose=") + v}).outcome, Outcome::kOk) << v;
    EXPECT_TRUE(g.verbose) << v;
  }
  for (const char* v : {"0", "f", "F", "false", "FALSE", "False"}) {
    Flags g;
    g.verbose = true;
    ASSERT_EQ(g.fs.Parse({std::string("-verbose=") + v}).outcome, Outcome::kOk) << v;
    EXPECT_FALSE(g.verbose) << v;
  }
}

TEST(FlagsTest, BoolFollowedByFalseDoesNotSetFalse) {
  // Go's quirk: "-flag false" sets the flag true and "false" is the first positional argument,
  // which also ends flag parsing.
  Flags f;
  auto r = f.fs.Parse({"-verbose", "false", "-name", "x"});
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  EXPECT_TRUE(f.verbose);
  EXPECT_EQ(f.name, "etcd");
  EXPECT_EQ(r.positional, (Args{"false", "-name", "x"}));
}

TEST(FlagsTest, BadBoolValue) {
  Flags f;
  auto r = f.fs.Parse({"-verbose=maybe"});
  ASSERT_EQ(r.outcome, Outcome::kError);
  EXPECT_EQ(r.error, "invalid boolean value \"maybe\" for -verbose: parse error");
  Flags g;
  auto e = g.fs.Parse({"-verbose="});
  ASSERT_EQ(e.outcome, Outcome::kError);
  EXPECT_EQ(e.error, "invalid boolean value \"\" for -verbose: parse error");
}

TEST(FlagsTest, UnknownFlag) {
  Flags f;
  auto r = f.fs.Parse({"-name", "x", "--nope=1"});
  ASSERT_EQ(r.outcome, Outcome::kError);
  EXPECT_EQ(r.error, "flag provided but not defined: -nope");
  EXPECT_EQ(f.name, "x");  // flags before the error are applied, as in Go
}

TEST(FlagsTest, NeedsAnArgument) {
  Flags f;
  auto r = f.fs.Parse({"-count"});
  ASSERT_EQ(r.outcome, Outcome::kError);
  EXPECT_EQ(r.error, "flag needs an argument: -count");
  Flags g;
  auto d = g.fs.Parse({"--period"});
  ASSERT_EQ(d.outcome, Outcome::kError);
  EXPECT_EQ(d.error, "flag needs an argument: -period");
}

TEST(FlagsTest, BadSyntax) {
  for (const char* a : {"---name", "-=x", "--=x"}) {
    Flags f;
    auto r = f.fs.Parse({a});
    ASSERT_EQ(r.outcome, Outcome::kError) << a;
    EXPECT_EQ(r.error, std::string("bad flag syntax: ") + a);
  }
}

TEST(FlagsTest, Help) {
  for (const char* a : {"-h", "-help", "--help", "--h"}) {
    Flags f;
    auto r = f.fs.Parse({"-verbose", a, "-name", "x"});
    EXPECT_EQ(r.outcome, Outcome::kHelp) << a;
    EXPECT_EQ(f.name, "etcd");
  }
  // A program that defines -h itself gets the flag, not help.
  FlagSet fs("p");
  bool h = false;
  fs.Bool("h", &h, false, "human");
  EXPECT_EQ(fs.Parse({"-h"}).outcome, Outcome::kOk);
  EXPECT_TRUE(h);
}

TEST(FlagsTest, ParsingStopsAtFirstNonFlagOrDoubleDash) {
  Flags f;
  auto r = f.fs.Parse({"-count=1", "cmd", "-count=2"});
  ASSERT_EQ(r.outcome, Outcome::kOk);
  EXPECT_EQ(f.count, 1);
  EXPECT_EQ(r.positional, (Args{"cmd", "-count=2"}));

  Flags g;
  auto d = g.fs.Parse({"-verbose", "--", "-count=2"});
  ASSERT_EQ(d.outcome, Outcome::kOk);
  EXPECT_EQ(g.count, 3);
  EXPECT_EQ(d.positional, (Args{"-count=2"}));

  Flags h;
  auto dash = h.fs.Parse({"-", "-verbose"});
  ASSERT_EQ(dash.outcome, Outcome::kOk);
  EXPECT_FALSE(h.verbose);
  EXPECT_EQ(dash.positional, (Args{"-", "-verbose"}));
}

TEST(FlagsTest, IntBaseDetection) {
  struct Case {
    const char* text;
    int64_t want;
  } cases[] = {
      {"42", 42},
      {"-42", -42},
      {"+7", 7},
      {"0x1f", 31},
      {"0X1F", 31},
      {"010", 8},
      {"0o17", 15},
      {"0O17", 15},
      {"0b101", 5},
      {"0B11", 3},
      {"-0x10", -16},
      {"0", 0},
      {"1_000", 1000},
      {"0x_ff", 255},
      {"9223372036854775807", INT64_MAX},
      {"-9223372036854775808", INT64_MIN},
  };
  for (const auto& c : cases) {
    Flags f;
    auto r = f.fs.Parse({"-count", c.text});
    ASSERT_EQ(r.outcome, Outcome::kOk) << c.text << ": " << r.error;
    EXPECT_EQ(f.count, c.want) << c.text;
  }
}

TEST(FlagsTest, BadInts) {
  for (const char* text :
       {"", "08", "0x", "abc", "1.5", "1e3", " 5", "5 ", "--5", "+-5", "_1", "1_", "1__0", "0b2"}) {
    Flags f;
    auto r = f.fs.Parse({"-count", text});
    ASSERT_EQ(r.outcome, Outcome::kError) << "\"" << text << "\"";
    EXPECT_EQ(r.error, "invalid value \"" + std::string(text) + "\" for flag -count: parse error");
    EXPECT_EQ(f.count, 3);
  }
}

TEST(FlagsTest, IntOutOfRange) {
  for (const char* text : {"9223372036854775808", "-9223372036854775809", "0x10000000000000000"}) {
    Flags f;
    auto r = f.fs.Parse({"-count", text});
    ASSERT_EQ(r.outcome, Outcome::kError) << text;
    EXPECT_EQ(r.error,
              "invalid value \"" + std::string(text) + "\" for flag -count: value out of range");
  }
}

TEST(FlagsTest, Durations) {
  Flags f;
  ASSERT_EQ(f.fs.Parse({"-period", "1h30m"}).outcome, Outcome::kOk);
  EXPECT_EQ(f.period, minutes(90));
  Flags g;
  ASSERT_EQ(g.fs.Parse({"--period=0"}).outcome, Outcome::kOk);
  EXPECT_EQ(g.period, milliseconds(0));
  Flags h;
  auto r = h.fs.Parse({"-period", "5"});
  ASSERT_EQ(r.outcome, Outcome::kError);
  EXPECT_EQ(r.error, "invalid value \"5\" for flag -period: parse error");
}

TEST(ParseGoDurationTest, AcceptsGoSyntax) {
  struct Case {
    const char* text;
    milliseconds want;
  } cases[] = {
      {"0", milliseconds(0)},         {"0s", milliseconds(0)},        {"300ms", milliseconds(300)},
      {"1.5s", milliseconds(1500)},   {"1.001s", milliseconds(1001)}, {"2m", minutes(2)},
      {"1h2m3s", seconds(3723)},      {"-1.5s", milliseconds(-1500)}, {"+2s", seconds(2)},
      {"3000000ns", milliseconds(3)}, {"1500us", milliseconds(1)},    {"-0", milliseconds(0)},
  };
  for (const auto& c : cases) {
    milliseconds d{-99};
    ASSERT_TRUE(ParseGoDuration(c.text, &d)) << c.text;
    EXPECT_EQ(d, c.want) << c.text;
  }
}

TEST(ParseGoDurationTest, RejectsMissingUnitsAndGarbage) {
  for (const char* text : {"", "5", "-5", "+5", "10 s", "s", "1d", "1.5", "-", "1s2", "."}) {
    milliseconds d{42};
    EXPECT_FALSE(ParseGoDuration(text, &d)) << "\"" << text << "\"";
    EXPECT_EQ(d, milliseconds(42)) << "output changed for \"" << text << "\"";
  }
}

TEST(FormatGoDurationTest, MatchesGoDurationString) {
  EXPECT_EQ(FormatGoDuration(milliseconds(0)), "0s");
  EXPECT_EQ(FormatGoDuration(milliseconds(1)), "1ms");
  EXPECT_EQ(FormatGoDuration(milliseconds(500)), "500ms");
  EXPECT_EQ(FormatGoDuration(milliseconds(1000)), "1s");
  EXPECT_EQ(FormatGoDuration(milliseconds(1500)), "1.5s");
  EXPECT_EQ(FormatGoDuration(milliseconds(1001)), "1.001s");
  EXPECT_EQ(FormatGoDuration(milliseconds(1010)), "1.01s");
  EXPECT_EQ(FormatGoDuration(seconds(30)), "30s");
  EXPECT_EQ(FormatGoDuration(minutes(2)), "2m0s");
  EXPECT_EQ(FormatGoDuration(seconds(90)), "1m30s");
  EXPECT_EQ(FormatGoDuration(hours(1)), "1h0m0s");
  EXPECT_EQ(FormatGoDuration(hours(1) + seconds(5)), "1h0m5s");
  EXPECT_EQ(FormatGoDuration(hours(72)), "72h0m0s");
  EXPECT_EQ(FormatGoDuration(milliseconds(-1500)), "-1.5s");
  EXPECT_EQ(FormatGoDuration(milliseconds(-20)), "-20ms");
}

TEST(FormatGoDurationTest, RoundTripsThroughParse) {
  for (int64_t ms : {0, 1, 999, 1000, 1234, 60000, 61001, 3600000, 3723004, 86400000}) {
    milliseconds back{-1};
    std::string text = FormatGoDuration(milliseconds(ms));
    ASSERT_TRUE(ParseGoDuration(text, &back)) << text;
    EXPECT_EQ(back, milliseconds(ms)) << text;
  }
}

TEST(FlagsTest, UsageLikeGo) {
  Flags f;
  bool x = false;
  f.fs.Bool("x", &x, false, "one-letter bool");
  std::string on_by_default;
  bool enabled = true;
  f.fs.Bool("enabled", &enabled, true, "switch");
  f.fs.String("empty", &on_by_default, "", "no default shown");
  std::chrono::milliseconds zero{0};
  f.fs.Duration("zero", &zero, milliseconds(0), "zero duration");
  int64_t n0 = 0;
  f.fs.Int("n0", &n0, 0, "zero int");
  EXPECT_EQ(f.fs.Usage(),
            "  -count int\n    \thow many (default 3)\n"
            "  -empty string\n    \tno default shown\n"
            "  -enabled\n    \tswitch (default true)\n"
            "  -n0 int\n    \tzero int\n"
            "  -name string\n    \tmember name (default \"etcd\")\n"
            "  -period duration\n    \thow often (default 30s)\n"
            "  -verbose\n    \tlog more\n"
            "  -x\tone-letter bool\n"
            "  -zero duration\n    \tzero duration\n");
}

TEST(FlagsTest, UsageIndentsMultiLineText) {
  FlagSet fs("p");
  std::string s;
  fs.String("mode", &s, "", "first line\nsecond line");
  EXPECT_EQ(fs.Usage(), "  -mode string\n    \tfirst line\n    \tsecond line\n");
}

}  // namespace
}  // namespace etcdw::common

namespace etcdw::common {
namespace {

TEST(FlagsTest, StringListsAsPflagsSliceAndArray) {
  FlagSet fs("prog");
  std::vector<std::string> slice, array;
  fs.StringList("endpoints", &slice, {"http://d:1"}, FlagSet::ListSyntax::kCommaSeparated, "eps");
  fs.Shorthand("e", "endpoints");
  fs.StringList("peer", &array, {"x"}, FlagSet::ListSyntax::kWhole, "peers");
  EXPECT_EQ(slice, Args{"http://d:1"});
  EXPECT_EQ(array, Args{"x"});
  auto r = fs.Parse({"--endpoints=a,,b", "-e", "c", "--peer=p,q", "-peer", "r"});
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  EXPECT_EQ(slice, (Args{"a", "b", "c"}));  // the default replaced, then appended to
  EXPECT_EQ(array, (Args{"p,q", "r"}));
  EXPECT_TRUE(fs.IsSet("endpoints"));
  EXPECT_FALSE(fs.IsSet("e"));  // the shorthand reports the flag it sets
  EXPECT_NE(fs.Usage().find("  -e strings\n    \tshorthand for --endpoints (default [http://d:1])"),
            std::string::npos)
      << fs.Usage();
}

TEST(FlagsTest, ShorthandSetsTheSameTarget) {
  FlagSet fs("prog");
  int64_t port = 0;
  fs.Int("server-port", &port, 8080, "port");
  fs.Shorthand("p", "server-port");
  ASSERT_EQ(fs.Parse({"-p", "9090"}).outcome, Outcome::kOk);
  EXPECT_EQ(port, 9090);
  EXPECT_TRUE(fs.IsSet("server-port"));
}

}  // namespace
}  // namespace etcdw::common
