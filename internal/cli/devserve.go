package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/server"
)

// serveDev runs serve's configuration c for `datajobs dev`, against dev's database and
// cluster, and prints the API's and the console's addresses once it accepts.
func serveDev(ctx context.Context, c server.Config, databaseURL, kubeconfig string, out io.Writer) error {
	c = devConfig(ctx, c, databaseURL, kubeconfig)
	cluster, err := kube.Connect(ctx, kube.ClusterConfig{Kubeconfig: kubeconfig})
	if err != nil {
		return err
	}
	if err := cluster.EnsureNamespace(ctx, c.Namespace); err != nil {
		return err
	}
	// The printer is waited for: it ends with the address or when Run returns.
	ready := make(chan net.Addr, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	printing, stop := context.WithCancel(ctx)
	defer stop()
	wg.Go(func() {
		select {
		case addr := <-ready:
			fmt.Fprintf(out, "datajobs API: http://%s\n", localURL(addr))
			fmt.Fprintf(out, "datajobs console: http://%s/ui/\n", localURL(addr))
		case <-printing.Done():
		}
	})
	return server.Run(ctx, c, ready)
}

// devConfig is serve's configuration c as dev runs it: on dev's database, cluster,
// images, addresses, keys and mail server.
func devConfig(ctx context.Context, c server.Config, databaseURL, kubeconfig string) server.Config {
	c.DatabaseURL, c.Kubeconfig = databaseURL, kubeconfig
	c = withDevImages(ctx, c)
	// dev serves on loopback (dev's --listen), without login (auth mode none).
	c.Listen, c.AdminListen = devListen(ctx)
	c.Auth.Mode = server.AuthNone
	// dev's webhook receivers run on the same machine.
	c.NotificationWebhookAllowPrivate = true
	c.Secrets.KeyFile = cmp.Or(c.Secrets.KeyFile, devSecretsKeyFile(ctx))
	// The real node's pods reach the API through dev's forward on the node's gateway.
	c.JobAPIURL = cmp.Or(c.JobAPIURL, devJobAPIURL(ctx))
	// Notification mails go to dev's Mailpit, shown in its web UI.
	return withDevMail(ctx, c)
}
