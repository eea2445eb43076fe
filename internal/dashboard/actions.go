package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// actionArgs are the parameters of an action, from the query of the
// confirmation page or the form that confirms it.
type actionArgs struct {
	Action   string
	Drive    string
	Pool     string
	Priority string
	Alert    string
}

func argsOf(v url.Values) actionArgs {
	return actionArgs{Action: v.Get("action"), Drive: v.Get("drive"), Pool: v.Get("pool"), Priority: v.Get("priority"),
		Alert: v.Get("alert")}
}

// describe says in words what the action will do, for the confirmation
// page, or why it is not valid.
func (a actionArgs) describe() (string, error) {
	needDrive := func() error {
		if _, err := placement.ParseDriveID(a.Drive); err != nil {
			return fmt.Errorf("drive %q: %w", a.Drive, err)
		}
		return nil
	}
	switch a.Action {
	case "fail-drive":
		if err := needDrive(); err != nil {
			return "", err
		}
		return fmt.Sprintf("Declare drive %s failed. It receives no new data and everything it held is rebuilt "+
			"from parity onto the other drives of its pool (as poolfs drive fail %s).", a.Drive, a.Drive), nil
	case "replace-drive":
		if err := needDrive(); err != nil {
			return "", err
		}
		return fmt.Sprintf("Take drive %s out of its pool and put a new empty drive in its place; rebalancing fills it "+
			"(as poolfs drive replace %s).", a.Drive, a.Drive), nil
	case "add-drive":
		return fmt.Sprintf("Add a new empty drive to pool %s; about 1/N of its data moves onto it (as poolfs drive add --pool %s).",
			a.poolName(), a.poolName()), nil
	case "rebuild-priority":
		if !slices.Contains(clustermap.Priorities, a.Priority) {
			return "", fmt.Errorf("priority %q: want one of %v", a.Priority, clustermap.Priorities)
		}
		return fmt.Sprintf("Set the rebuild priority of pool %s to %s (as poolfs pool set rebuild-priority %s).",
			a.poolName(), a.Priority, a.Priority), nil
	case "scrub-start":
		return fmt.Sprintf("Start a scrub of pool %s: read every fragment, check checksums and parity, repair what is bad "+
			"(as poolfs scrub start).", a.poolName()), nil
	case "scrub-stop":
		return "Stop the running scrub (as poolfs scrub stop).", nil
	case "ack-alert":
		if a.Alert == "" {
			return "", fmt.Errorf("no alert named")
		}
		return fmt.Sprintf("Acknowledge alert %s: it stays listed until resolved, but no longer notifies.", a.Alert), nil
	}
	return "", fmt.Errorf("unknown action %q", a.Action)
}

func (a actionArgs) poolName() string {
	if a.Pool == "" {
		return "(the first)"
	}
	return a.Pool
}

type confirmData struct {
	actionArgs
	Description string
}

// confirm shows what an action will do and the form that does it.
func (s *Server) confirm(w http.ResponseWriter, r *http.Request) {
	a := argsOf(r.URL.Query())
	desc, err := a.describe()
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	s.render(w, r, http.StatusOK, "confirm.html", view{Title: "Confirm", Data: confirmData{actionArgs: a, Description: desc}})
}

// action does a confirmed action: admins only (adminOnly), with the
// session's CSRF token and the confirmation field.
func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if !checkCSRF(r) {
		s.log.Warn("dashboard: action refused: CSRF token missing or wrong", "user", userOf(r).user)
		s.fail(w, r, http.StatusForbidden, "CSRF token missing or wrong: reload the page")
		return
	}
	a := argsOf(r.PostForm)
	if _, err := a.describe(); err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		s.fail(w, r, http.StatusBadRequest, "actions need their confirmation step")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	user := userOf(r).user
	msg, err := s.do(ctx, a, user)
	s.log.Info("dashboard: action", "user", user, "action", a.Action, "drive", a.Drive, "pool", a.Pool,
		"priority", a.Priority, "alert", a.Alert, "err", err)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, a.Action+": "+err.Error())
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.sess.setFlash(c.Value, msg)
	}
	to := "/"
	if a.Action == "ack-alert" {
		to = "/alerts"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func (s *Server) do(ctx context.Context, a actionArgs, user string) (string, error) {
	cl := s.cfg.Cluster
	switch a.Action {
	case "fail-drive", "replace-drive":
		id, err := placement.ParseDriveID(a.Drive)
		if err != nil {
			return "", err
		}
		if a.Action == "fail-drive" {
			if err := cl.FailDrive(ctx, id); err != nil {
				return "", err
			}
			return fmt.Sprintf("drive %v failed; rebuild started", id), nil
		}
		nid, err := cl.ReplaceDrive(ctx, id)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("drive %v replaced by %v; rebalancing", id, nid), nil
	case "add-drive":
		id, err := cl.AddDrive(ctx, a.Pool)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("drive %v added; rebalancing", id), nil
	case "rebuild-priority":
		pool := a.Pool
		if pool == "" {
			m, err := cl.Map(ctx)
			if err != nil {
				return "", err
			}
			pool = m.Pools[0].Name
		}
		if err := cl.SetRebuildPriority(ctx, pool, a.Priority); err != nil {
			return "", err
		}
		return fmt.Sprintf("pool %s: rebuild priority %s", pool, a.Priority), nil
	case "scrub-start":
		if _, err := cl.Scrub(ctx, "start", a.Pool); err != nil {
			return "", err
		}
		return "scrub started", nil
	case "scrub-stop":
		if _, err := cl.Scrub(ctx, "stop", ""); err != nil {
			return "", err
		}
		return "scrub stopped", nil
	case "ack-alert":
		if s.cfg.Alerts == nil {
			return "", fmt.Errorf("this cluster has no alerts")
		}
		if _, err := s.cfg.Alerts.AckAlert(ctx, a.Alert, user); err != nil {
			return "", err
		}
		return "alert " + a.Alert + " acknowledged", nil
	}
	return "", fmt.Errorf("unknown action %q", a.Action)
}
