package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"riverqueue.com/riverui"

	"github.com/paylock/paylock/store"
)

// RiverUIPrefix is where River UI is served on the admin listener.
const RiverUIPrefix = "/admin/river"

// RiverUI returns River UI as mounts for Config.Mounts (under
// /admin/river/, over the store's insert-only River client: it reads and
// manages jobs, works none) and stop, which ends River UI's background
// services. They run until stop is called or ctx ends.
func RiverUI(ctx context.Context, st *store.Store, logger *slog.Logger) (mounts map[string]http.Handler, stop func(), err error) {
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(st.JobClient(), nil),
		Logger:    logger.With(slog.String("component", "riverui")),
		Prefix:    RiverUIPrefix,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("river ui: %w", err)
	}
	uctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := ui.Start(uctx); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("river ui: start: %w", err)
	}
	return map[string]http.Handler{RiverUIPrefix + "/": ui}, cancel, nil
}
