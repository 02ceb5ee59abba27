package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/analyzer"
)

// Version is mrep's version: set at link time (-ldflags "-X main.Version=v1.2.3"), else the
// module version or VCS revision Go recorded in the binary, else "dev".
var Version = ""

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}

// versionLine is what --version prints: the tool, the analyzer whose numbers it prints (cached
// results are keyed by it) and the Go that built it.
func versionLine() string {
	return fmt.Sprintf("mrep %s\nanalyzer %s\n%s %s/%s\n", version(), analyzer.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// maxArgs is how many positional arguments each command takes (-1: any number). A stray
// argument is an error, not silently ignored (`mrep runs extra`).
var maxArgs = map[string]int{
	"ingest": -1, "runs": 0, "show": 1, "rm": -1, "analyze": 1, "report": 1, "diff": 2,
	"history": 1, "chips": 0, "check": 0, "plan": 0, "plan train": 1, "plan serve": 1,
	"validate": 1, "calibrate": 1,
}

// conventions makes every command follow the CLI conventions people expect from gh or git:
// usage errors (unknown command, unknown flag, stray argument) print the usage and exit 2.
func conventions(app *cli.App) {
	cli.FlagStringer = namedPlaceholders
	app.Version = version()
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprint(c.App.Writer, versionLine()) }
	app.OnUsageError = usageError
	before := app.Before
	app.Before = func(c *cli.Context) error {
		if verb := c.Args().First(); verb != "" && app.Command(verb) == nil {
			cli.ShowAppHelp(c)
			return cli.Exit(fmt.Sprintf("unknown command %q (see the list above)", verb), exitUsage)
		}
		if before != nil {
			return before(c)
		}
		return nil
	}
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			full := strings.TrimSpace(prefix + " " + cmd.Name)
			cmd.OnUsageError = usageError
			if n, ok := maxArgs[full]; ok && n >= 0 && cmd.Action != nil {
				action, name := cmd.Action, full
				cmd.Action = func(c *cli.Context) error {
					if c.NArg() > n {
						cli.ShowSubcommandHelp(c)
						return cli.Exit(fmt.Sprintf("%s takes at most %d argument(s), got %d: %q", name, n, c.NArg(), c.Args().Slice()[n:]), exitUsage)
					}
					return action(c)
				}
			}
			walk(full, cmd.Subcommands)
		}
	}
	walk("", app.Commands)
}

func usageError(c *cli.Context, err error, _ bool) error {
	fmt.Fprintf(c.App.ErrWriter, "Incorrect usage: %v\n\n", err)
	return cli.Exit(err.Error(), exitUsage)
}

// defaultFlagStringer is urfave/cli's own help line for a flag.
var defaultFlagStringer = cli.FlagStringer

// namedPlaceholders is the flag's help line with urfave's generic "value" placeholder replaced
// by the flag's name in capitals (--isl ISL, --tpot TPOT), as gh and git write theirs; flags
// whose usage names a placeholder in backquotes keep it.
func namedPlaceholders(f cli.Flag) string {
	s := defaultFlagStringer(f)
	names := f.Names()
	if len(names) == 0 {
		return s
	}
	head, tail, _ := strings.Cut(s, "\t")
	ph := strings.ToUpper(strings.ReplaceAll(names[0], "-", "_"))
	head = strings.ReplaceAll(head, " value", " "+ph)
	if tail == "" {
		return head
	}
	return head + "\t" + tail
}
