package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"poolfs/internal/cluster"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
)

// clusterCmd groups the commands that make a cluster of several machines
// and join machines to it (docs/multihost.md).
func clusterCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Make a cluster of several machines, join machines to it, make its first pool",
	}
	cmd.AddCommand(clusterCreateCmd(g), clusterTokenCmd(g), clusterJoinCmd(g), clusterPoolCmd(g), clusterRevokeCmd(g))
	return cmd
}

func clusterCreateCmd(g *globals) *cobra.Command {
	var name, mgmtAddr string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Make a new cluster's directory (secret, id, CA) and print its join tokens",
		Long: `Make the directory (-c DIR) of a new cluster whose management service will listen
on --mgmt, an address every machine of the cluster can reach (or several,
comma-separated: one management service runs at each, one leads and the others
stand by; on their machines "poolfs cluster join" makes the directory). It makes
the cluster CA (ca.key stays in DIR) and prints two join tokens: the client token
enrols client machines only; the server token enrols storage servers, metadata and
management services and the machines that administer the cluster. Each node makes
its own key and gets a certificate from the management service when its first
service starts. A token holds the cluster secret: hand it over as a password.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := cluster.Create(g.dir, name, mgmtAddr)
			if err != nil {
				return err
			}
			fmt.Printf("cluster made in %s; start its management service with\n", g.dir)
			for _, a := range cluster.MgmtAddrs(mgmtAddr) {
				fmt.Printf("  poolfs -c %s mgmt --db postgres://... --listen %s\n", g.dir, a)
			}
			ct, err := cluster.ReadToken(g.dir, "client")
			if err != nil {
				return err
			}
			fmt.Printf("join tokens (they hold the secret: keep them like passwords; poolfs cluster join reads one on standard input, never as an argument)\nfor clients:\n%s\nfor servers and administering machines:\n%s\n", ct, t)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "cluster name (default: the directory's name)")
	cmd.Flags().StringVar(&mgmtAddr, "mgmt", "", "host:port the management service will listen on, reachable from every machine; several comma-separated for standbys (required)")
	_ = cmd.MarkFlagRequired("mgmt")
	return cmd
}

func clusterTokenCmd(g *globals) *cobra.Command {
	var client bool
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Print the server join token of the cluster of -c DIR (--client: the client token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			class := "server"
			if client {
				class = "client"
			}
			t, err := cluster.ReadToken(g.dir, class)
			if err != nil {
				return err
			}
			fmt.Println(t)
			return nil
		},
	}
	cmd.Flags().BoolVar(&client, "client", false, "print the token that enrols client machines only")
	return cmd
}

func clusterJoinCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "join",
		Short: "Make -c DIR this machine's directory of the cluster of a join token (for clients and metadata servers)",
		Long: `Make -c DIR this machine's directory of the cluster of a join token (printed by
` + "`poolfs cluster create` or `poolfs cluster token`" + `). The token is read from
--token-file FILE, else from the environment variable ` + tokenEnv + ` if it is set,
else from standard input (without echo on a terminal), never from the command
line, where every local user reads it:

  poolfs -c /etc/poolfs cluster join --token-file server.token
  ssh db1 poolfs -c /etc/poolfs cluster token | poolfs -c /etc/poolfs cluster join`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return tokenArgError("cluster join", "on standard input, in a file of mode 0600 by --token-file FILE, or in "+tokenEnv)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := readJoinToken(file, true)
			if err != nil {
				return err
			}
			if err := cluster.Join(g.dir, t); err != nil {
				return err
			}
			fmt.Printf("joined: %s reaches the management service at %s\n", g.dir, t.Mgmt)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "token-file", "", "read the join token from `FILE` (- : standard input); "+tokenFileHelp)
	return cmd
}

func clusterPoolCmd(g *globals) *cobra.Command {
	var spec mgmt.PoolOfServers
	var scheme, unit, preservation, layout string
	cmd := &cobra.Command{
		Use:   "pool NAME",
		Short: "Make a pool of the drives that storage servers registered for it (--pool NAME, default \"default\")",
		Long: `Make a pool of every drive that running storage servers registered for pool NAME
and that is in no pool yet. Servers that register later add their drives to it.
Placement keeps at most M fragments of a stripe on one server (and one enclosure,
one rack, where servers are labelled) whenever there are enough servers.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec.Name = args[0]
			var err error
			if spec.K, spec.M, err = cluster.ParseScheme(scheme); err != nil {
				return err
			}
			u, err := parseSize(unit)
			if err != nil || u > 1<<32-1 {
				return fmt.Errorf("--unit %q: want e.g. 1M", unit)
			}
			spec.Unit = uint32(u)
			spec.Preservation = -1
			if preservation != "auto" {
				if spec.Preservation, err = strconv.Atoi(preservation); err != nil || spec.Preservation < 0 {
					return fmt.Errorf("--preservation %q: want a number of drives or auto", preservation)
				}
			}
			if spec.Layout, err = placement.ParseLayout(layout); err != nil {
				return err
			}
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				m, err := conn.Mgmt.CreatePoolOfServers(cmd.Context(), spec)
				if err != nil {
					return err
				}
				p, _ := m.PoolByName(spec.Name)
				fmt.Printf("pool %s: %d+%d over %d drives of %d servers, map epoch %d\n", p.Name, p.K, p.M, len(p.Drives), len(m.Servers), m.Epoch)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&scheme, "scheme", "8+2", "erasure scheme K+M")
	f.StringVar(&unit, "unit", "1M", "stripe unit: bytes of one data fragment of a full stripe")
	f.StringVar(&preservation, "preservation", "auto", "drives' worth of capacity kept free for rebuilds (auto: grows with the pool)")
	f.StringVar(&layout, "layout", "declustered", "declustered, or grouped (RAID-6 style groups)")
	return cmd
}

func clusterRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NODE",
		Short: "Refuse every certificate of machine NODE from now on (its name: the storage server's --server, mgmt@ADDR, meta@ADDR, or a client's host name)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, secret, err := cluster.ReadInfo(g.dir)
			if err != nil {
				return err
			}
			mc, mclose, err := cluster.DialMgmt(info, secret)
			if err != nil {
				return err
			}
			defer mclose()
			if err := mc.Revoke(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Printf("revoked %s: every service and client refuses it, on open connections too, within 3 s\n", args[0])
			return nil
		},
	}
}
