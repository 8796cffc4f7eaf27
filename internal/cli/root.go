// Package cli holds the cobra commands of the datajobs binary.
package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Version is the build version, set with -ldflags "-X github.com/datajobs/datajobs/internal/cli.Version=...".
var Version = "dev"

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "datajobs:", err)
		return 1
	}
	return 0
}

// globals are the flags every command shares.
type globals struct {
	logLevel  string
	logFormat string
	stdout    io.Writer
	stderr    io.Writer
}

func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: must be debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch g.logFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(g.stderr, opts)), nil
	default:
		return nil, fmt.Errorf("log format %q: must be json or text", g.logFormat)
	}
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "datajobs",
		Short:         "Control service for data jobs on Kubernetes",
		Long:          "datajobs keeps data jobs and their deployments in PostgreSQL and keeps Kubernetes CronJobs an exact projection of them.\nEvery flag can also be set as an environment variable DATAJOBS_<FLAG_IN_UPPER_SNAKE>.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return flagsFromEnv(cmd)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "json", "log format: json or text")

	serve := newServeCommand(g)
	root.AddCommand(serve.command, newMigrateCommand(g), newSyncCommand(g), newVersionCommand(g), newDevCommand(serve.run))
	root.AddCommand(newImportCommand(g), newReleaseCommand(g), newSecretsCommand(g), newNotificationsCommand(g))
	root.AddCommand(newApplyCommand(g), newExportCommand(g))
	return root
}

// flagsFromEnv sets every flag the user did not give on the command line from its
// environment variable DATAJOBS_<FLAG_IN_UPPER_SNAKE>, when that is set.
func flagsFromEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := envName(f.Name)
		if v, ok := os.LookupEnv(name); ok {
			if setErr := cmd.Flags().Set(f.Name, v); setErr != nil {
				err = fmt.Errorf("environment variable %s: %w", name, setErr)
			}
		}
	})
	return err
}

func newVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprintln(g.stdout, "datajobs", Version)
		},
	}
}
