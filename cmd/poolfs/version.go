package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version: module version, source commit (with +dirty for uncommitted changes) and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Println(versionString())
			return nil
		},
	}
}

// versionString says which poolfs this binary is, from the build
// information the Go toolchain embeds (`go build` in a git checkout
// records the commit and whether the tree had uncommitted changes):
//
//	poolfs (devel) commit 0123456789ab+dirty 2026-11-25T15:00:00Z go1.26.8 linux/amd64
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Sprintf("poolfs (no build information) %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	return formatVersion(bi, runtime.GOOS+"/"+runtime.GOARCH)
}

// formatVersion is versionString for given build information.
func formatVersion(bi *debug.BuildInfo, platform string) string {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	parts := []string{"poolfs", v}
	if rev := settings["vcs.revision"]; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if settings["vcs.modified"] == "true" {
			rev += "+dirty"
		}
		parts = append(parts, "commit", rev)
		if t := settings["vcs.time"]; t != "" {
			parts = append(parts, t)
		}
	} else {
		parts = append(parts, "commit unknown (built without VCS information)")
	}
	return strings.Join(append(parts, bi.GoVersion, platform), " ")
}
