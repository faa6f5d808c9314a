// Command edge runs speech pipelines: log-mel features, an ONNX Runtime
// encoder, CTC decoding and alignment, and residual vector quantisation.
//
// Every sub-command lives in its own file and registers itself in init();
// logs and progress go to stderr, results to stdout or --out.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	// Op families register themselves in init().
	_ "github.com/edgespeech/edge/plugins/dpx"
	_ "github.com/edgespeech/edge/plugins/fbank"
	_ "github.com/edgespeech/edge/plugins/rvq"
	_ "github.com/edgespeech/edge/plugins/vad"
)

// command is one sub-command of edge.
type command struct {
	name    string
	usage   string // argument synopsis, e.g. "NAME --in NAME=FILE.npy ..."
	summary string
	// run parses its own flags from args (everything after the command name).
	run func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("edge: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks an error the user can fix by reading the usage line.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "edge: unknown command %q\n\n", args[0])
		printUsage()
		return 2
	}
	if err := c.run(ctx, args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "edge %s: %v\n", c.name, err)
		if errors.Is(err, errUsage) {
			fmt.Fprintf(os.Stderr, "usage: edge %s %s\n", c.name, c.usage)
			return 2
		}
		return 1
	}
	return 0
}

func printUsage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("edge: speech pipelines on CPUs and GPUs\n\nCommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-11s %s\n", n, commands[n].summary)
	}
	b.WriteString("\nRun 'edge COMMAND --help' for a command's flags.\n")
	fmt.Fprint(os.Stderr, b.String())
}

// newFlags returns a flag set for a sub-command whose usage goes to stderr.
func newFlags(c string, usage string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("edge "+c, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: edge %s %s\n\nFlags:\n%s", c, usage, fs.FlagUsages())
	}
	return fs
}
