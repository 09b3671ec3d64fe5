package handler

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
)

// errFinished: another delivery settled the transaction moments ago (the
// lock's finished marker); never an answer, the pipeline settles with a read.
var errFinished = errors.New("handler: transaction settled moments ago")

// Header values shared by every answer; net/http only reads them.
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	if r, ok := v.(result); ok {
		// The answer of nearly every delivery, written as json.Encoder
		// would write it, without reflection.
		if b, ok := r.appendJSON(make([]byte, 0, 64+len(r.TransactionID))); ok {
			w.WriteHeader(status)
			_, _ = w.Write(b)
			return
		}
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// appendJSON appends r as json.Encoder encodes it, newline included; ok is
// false when a value holds a byte the encoder would escape (then the
// encoder writes it).
func (r result) appendJSON(b []byte) ([]byte, bool) {
	if !plainJSONText(r.Result) || !plainJSONText(r.TransactionID) || r.Type != "" || r.Types != nil {
		return nil, false // an ignored delivery's type: encoding/json writes it
	}
	b = append(b, `{"result":"`...)
	b = append(b, r.Result...)
	if r.TransactionID != "" {
		b = append(b, `","transaction_id":"`...)
		b = append(b, r.TransactionID...)
	}
	return append(b, "\"}\n"...), true
}

// plainJSONText reports whether s is printable ASCII that encoding/json
// writes as is between quotes (no quote, backslash or HTML character).
func plainJSONText(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < ' ' || c > '~', c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// logLevelFor is the level a request's summary line is logged at.
func logLevelFor(status int) slog.Level {
	switch {
	case status == http.StatusUnprocessableEntity:
		return slog.LevelWarn
	case status >= 500:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}
