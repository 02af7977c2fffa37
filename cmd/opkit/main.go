package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `opkit scaffolds an operator built on opkit, in kubebuilder's layout.

Usage:
  opkit init --domain DOMAIN --repo MODULE [--project-name NAME] [--opkit-replace DIR | --opkit-version VERSION] [--fetch-deps=false] [--force]
  opkit create api --group GROUP --version VERSION --kind KIND [--plural PLURAL] [--make=false] [--force]

Run "opkit init -h" or "opkit create api -h" for the flags of each.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], ".", os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "opkit:", err)
		os.Exit(1)
	}
}

// run executes one opkit command (args without the program name) on the
// project in dir. Commands it runs (go mod tidy, make) write to stdout and
// stderr. A usage error prints the usage on stderr and returns flag.ErrHelp.
func run(ctx context.Context, args []string, dir string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "init":
		return runInit(ctx, args[1:], dir, stdout, stderr)
	case "create":
		if len(args) < 2 || args[1] != "api" {
			fmt.Fprint(stderr, usage)
			return flag.ErrHelp
		}
		return runCreateAPI(ctx, args[2:], dir, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return flag.ErrHelp
	}
}

// parseFlags parses args with fl, printing usage (then fl's defaults) to
// stderr on a parse error or -h, and refuses positional arguments.
func parseFlags(fl *flag.FlagSet, args []string, stderr io.Writer, usage string) error {
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", strings.TrimPrefix(fl.Name(), "opkit "), fl.Args())
	}
	return nil
}
