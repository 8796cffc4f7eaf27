package cli

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/spf13/cobra"

	"github.com/datajobs/datajobs/internal/server"
)

// ServeFunc runs `serve` in-process against the given database and kubeconfig, with the
// other settings at their flag values. `datajobs dev` uses it.
type ServeFunc func(ctx context.Context, databaseURL, kubeconfig string, out io.Writer) error

type serveCommand struct {
	command *cobra.Command
	run     ServeFunc
}

// serveFlags are serve's flags: most are parsed into cfg, the others by config.
type serveFlags struct {
	cfg           server.Config
	syncMode      string
	render        renderFlags
	introspection bool
	authMode      string
}

// config is the server configuration the flags give, logging as g says.
func (fl *serveFlags) config(g *globals) (server.Config, error) {
	c := fl.cfg
	c.SyncMode = server.SyncMode(fl.syncMode)
	c.Requests.DisableGraphQLIntrospection = !fl.introspection
	c.Auth.Mode = server.AuthMode(fl.authMode)
	return serverConfig(g, c, &fl.render)
}

// serverConfig completes c, from the flags of serve or sync --once, the same way for
// both: logging as g says, this build's version, and the rendering of render.
func serverConfig(g *globals, c server.Config, render *renderFlags) (server.Config, error) {
	log, err := g.logger()
	if err != nil {
		return c, err
	}
	c.Logger, c.Version = log, Version
	return c, render.apply(&c)
}

func newServeCommand(g *globals) serveCommand {
	fl := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API and run the synchronizer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := fl.config(g)
			if err != nil {
				return err
			}
			return server.Run(cmd.Context(), c, nil)
		},
	}
	registerServeFlags(cmd.Flags(), fl)
	return serveCommand{command: cmd, run: func(ctx context.Context, databaseURL, kubeconfig string, out io.Writer) error {
		c, err := fl.config(g)
		if err != nil {
			return err
		}
		return serveDev(ctx, c, databaseURL, kubeconfig, out)
	}}
}

// localURL turns a wildcard listen address into one a user can paste.
func localURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.IsUnspecified() {
		if ok {
			return fmt.Sprintf("localhost:%d", tcp.Port)
		}
	}
	return addr.String()
}
