package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paylock/paylock/internal/fakestripe"
	"github.com/paylock/paylock/signature"
)

// config is what the flags say.
type config struct {
	webhooks, admin []string
	adminToken      string
	source          string
	stripeAddr      string
	stripeKey       string
	webhookSecret   signature.Secret
	receiver        string
	orders          int
	runID           string
	spread          time.Duration
	deadline        time.Duration
	settle          time.Duration
	readyFile       string
	json            bool
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("syncrace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	webhooks := fs.String("webhooks", "", "comma-separated base URLs of the replicas' webhook listeners (http://127.0.0.1:8080,...)")
	admin := fs.String("admin", "", "comma-separated base URLs of the replicas' admin listeners, in the same order")
	tokenEnv := fs.String("admin-token-env", "PAYLOCK_ADMIN_TOKEN", "the environment variable holding the admin listeners' bearer token (empty value: none sent)")
	source := fs.String("source", "stripe", "the Stripe source's name (POST /webhooks/<source>)")
	stripeAddr := fs.String("stripe-addr", "", "where to serve the fake Stripe API the source's api_url names (host:port)")
	keyEnv := fs.String("stripe-key-env", "STRIPE_SYNC_KEY", "the environment variable holding the secret key the fake Stripe API accepts (the source's api_key_env)")
	secretsEnv := fs.String("secrets-env", "STRIPE_WEBHOOK_SECRETS", "the environment variable holding the source's webhook secrets (the first signs)")
	receiver := fs.String("receiver", "", "base URL of the fakereceiver (--other-events) the replicas forward to")
	orders := fs.Int("orders", 50, "PaymentIntents, each naming its own order")
	runID := fs.String("run-id", "", "prefix of the run's PaymentIntent and order ids (default: from the clock)")
	spread := fs.Duration("spread", 3*time.Second, "the (sync, webhook) pairs start spread over this long")
	deadline := fs.Duration("deadline", 90*time.Second, "every sync and webhook must be answered 2xx this long after the race began")
	settle := fs.Duration("settle", 60*time.Second, "how long to wait for the receiver to hold every message after the last acknowledgement")
	readyFile := fs.String("ready-file", "", "a file written when the race begins (after the orders are registered)")
	asJSON := fs.Bool("json", false, "print the result as JSON (pspsim's shape)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	c := config{
		webhooks: splitURLs(*webhooks), admin: splitURLs(*admin), adminToken: getenv(*tokenEnv),
		source: *source, stripeAddr: *stripeAddr, stripeKey: getenv(*keyEnv), receiver: strings.TrimRight(*receiver, "/"),
		orders: *orders, runID: *runID, spread: *spread, deadline: *deadline,
		settle: *settle, readyFile: *readyFile, json: *asJSON,
	}
	switch {
	case len(c.webhooks) == 0 || len(c.webhooks) != len(c.admin):
		return c, errors.New("--webhooks and --admin must name the same replicas, at least one")
	case c.stripeAddr == "":
		return c, errors.New("--stripe-addr is required")
	case c.stripeKey == "":
		return c, fmt.Errorf("$%s is empty: the fake Stripe API needs the key the replicas send", *keyEnv)
	case c.receiver == "":
		return c, errors.New("--receiver is required")
	case c.orders < 1:
		return c, errors.New("--orders must be at least 1")
	}
	secrets, err := signature.ParseSecrets(signature.SchemeStripe, getenv(*secretsEnv))
	if err != nil {
		return c, fmt.Errorf("$%s: %w", *secretsEnv, err)
	}
	c.webhookSecret = secrets[0]
	if c.runID == "" {
		c.runID = fmt.Sprintf("sr%d", time.Now().UnixNano()%1e9)
	}
	return c, nil
}

func splitURLs(s string) []string {
	var out []string
	for u := range strings.SplitSeq(s, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			out = append(out, u)
		}
	}
	return out
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "syncrace: %v\n", err)
		return 2
	}
	res, err := race(ctx, c, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "syncrace: %v\n", err)
		return 1
	}
	if c.json {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdout, "%s: %d orders, %d syncs and webhooks acknowledged of %d, %d rows, %d payment.recorded, %d order.paid, %d duplicates, %d lost\n",
			res.Verdict, res.Orders, res.Acknowledged, res.Deliveries, res.Rows, res.PaymentRecorded, res.OrderPaid, res.Duplicates, res.Lost)
		for _, r := range res.Reasons {
			fmt.Fprintf(stdout, "  %s\n", r)
		}
	}
	if res.Verdict != "pass" {
		return 1
	}
	return 0
}

// pair is one PaymentIntent and the order it names.
type pair struct {
	pi, order string
	amount    int64
	body      []byte // its payment_intent.succeeded webhook
}

// race runs the whole scenario and judges it.
func race(ctx context.Context, c config, stderr io.Writer) (Result, error) {
	api := fakestripe.New(c.stripeKey)
	ln, err := net.Listen("tcp", c.stripeAddr)
	if err != nil {
		return Result{}, fmt.Errorf("the fake Stripe API: %w", err)
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	pairs := make([]pair, c.orders)
	for i := range pairs {
		p := fakestripe.Payment{
			ID:       fmt.Sprintf("pi_%s_%03d", c.runID, i),
			Amount:   int64(1000 + i),
			Currency: "jpy",
			Created:  time.Now(),
			Metadata: map[string]string{"order_id": fmt.Sprintf("%s-order-%03d", c.runID, i)},
		}
		api.PutPaymentIntent(fakestripe.PaymentIntent(p, "succeeded"))
		pairs[i] = pair{pi: p.ID, order: p.Metadata["order_id"], amount: p.Amount, body: fakestripe.PaymentIntentSucceeded(p)}
	}

	client := &http.Client{Timeout: 15 * time.Second}
	regCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = register(regCtx, client, c, pairs)
	cancel()
	if err != nil {
		return Result{}, err
	}
	if c.readyFile != "" {
		if err := os.WriteFile(c.readyFile, []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
			return Result{}, err
		}
	}
	obs := Observations{Source: c.source}
	for _, p := range pairs {
		obs.Pairs = append(obs.Pairs, Pair{PaymentIntent: p.pi, Order: p.order})
	}
	t0 := time.Now()
	obs.Deliveries = racePairs(ctx, client, c, pairs)
	fmt.Fprintf(stderr, "syncrace: %d syncs and webhooks answered in %.1fs\n", len(obs.Deliveries), time.Since(t0).Seconds())
	collect(ctx, client, c, &obs)
	obs.StripeRequests = api.Requests()
	return judge(obs), nil
}

// racePairs starts each pair's sync and webhook at the same instant, the
// pairs spread over c.spread, and returns every side's delivery.
func racePairs(ctx context.Context, client *http.Client, c config, pairs []pair) []Delivery {
	ctx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	t0 := time.Now()
	var mu sync.Mutex
	var out []Delivery
	var wg sync.WaitGroup
	n := len(c.webhooks)
	for i, p := range pairs {
		startAt := t0.Add(c.spread * time.Duration(i) / time.Duration(len(pairs)))
		for _, s := range []side{
			{name: "sync", first: i % n, send: func(k int) (*http.Request, error) {
				u := c.admin[k] + "/admin/api/v1/payments/" + url.PathEscape(c.source) + "/" + url.PathEscape(p.pi) + "/sync"
				return c.adminRequest(http.MethodPost, u)
			}},
			{name: "webhook", first: (i + 1) % n, send: func(k int) (*http.Request, error) {
				req, err := http.NewRequest(http.MethodPost, c.webhooks[k]+"/webhooks/"+url.PathEscape(c.source), bytes.NewReader(p.body))
				if err != nil {
					return nil, err
				}
				for h, v := range signature.Sign(signature.SchemeStripe, c.webhookSecret, "", time.Now(), p.body) {
					req.Header[h] = v
				}
				req.Header.Set("Content-Type", "application/json")
				return req, nil
			}},
		} {
			wg.Go(func() {
				time.Sleep(time.Until(startAt))
				d := deliver(ctx, client, n, s)
				d.PaymentIntent = p.pi
				mu.Lock()
				out = append(out, d)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return out
}

// adminRequest is a request to an admin listener, with the token.
func (c config) adminRequest(method, u string) (*http.Request, error) {
	req, err := http.NewRequest(method, u, nil)
	if err == nil && c.adminToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.adminToken)
	}
	return req, err
}

// collect waits until the receiver holds every payment's and every
// order's message (or c.settle passes), then a little longer for late
// redeliveries and any message that should never come, and reads the
// receiver, the payments and the orders into obs.
func collect(ctx context.Context, client *http.Client, c config, obs *Observations) {
	s0 := time.Now()
	for {
		if err := readReceiver(ctx, client, c, obs); err == nil && obs.complete() {
			break
		}
		if time.Since(s0) > c.settle || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	obs.SettleSeconds = time.Since(s0).Round(100 * time.Millisecond).Seconds()
	time.Sleep(2 * time.Second)
	if err := readReceiver(ctx, client, c, obs); err != nil {
		obs.Errors = append(obs.Errors, "the receiver: "+err.Error())
	}
	readPayments(ctx, client, c, obs)
	readOrders(ctx, client, c, obs)
}

// register registers each pair's order, retried on the next replica until
// it is answered 201 or 200 (the same body again).
func register(ctx context.Context, client *http.Client, c config, pairs []pair) error {
	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for i, p := range pairs {
		body := fmt.Appendf(nil, `{"order_id":%q,"amount":%d,"currency":"JPY","expires_at":%q}`, p.order, p.amount, expires)
		for k := i; ; k++ {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.admin[k%len(c.admin)]+"/admin/api/v1/orders", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			if c.adminToken != "" {
				req.Header.Set("Authorization", "Bearer "+c.adminToken)
			}
			res, err := client.Do(req)
			if err == nil {
				b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
				res.Body.Close()
				switch {
				case res.StatusCode == http.StatusCreated || res.StatusCode == http.StatusOK:
				case res.StatusCode >= 400 && res.StatusCode < 500 && res.StatusCode != http.StatusConflict:
					return fmt.Errorf("registering order %s: %d %s", p.order, res.StatusCode, b)
				default:
					err = fmt.Errorf("%d %s", res.StatusCode, b)
				}
			}
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("registering order %s: %w (last: %v)", p.order, ctx.Err(), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// side is one of a pair's two callers: the checkout backend's sync or the
// PSP's webhook, first sent to replica first, each retry to the next.
type side struct {
	name  string
	first int
	send  func(replica int) (*http.Request, error)
}

// deliver sends until an answer is 2xx, a 4xx other than 409 (refused: not
// retried), or ctx ends.
func deliver(ctx context.Context, client *http.Client, replicas int, s side) Delivery {
	d := Delivery{Side: s.name}
	start := time.Now()
	backoff := 100 * time.Millisecond
	for k := s.first; ctx.Err() == nil; k++ {
		req, err := s.send(k % replicas)
		if err != nil {
			d.Answers = append(d.Answers, "err:request")
			return d
		}
		res, err := client.Do(req.WithContext(ctx))
		d.Attempts++
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			d.Answers = append(d.Answers, transportClass(err))
		} else {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
			res.Body.Close()
			var answer struct {
				Result string `json:"result"`
			}
			_ = json.Unmarshal(b, &answer)
			class := fmt.Sprintf("%d %s", res.StatusCode, s.name)
			if res.StatusCode/100 == 2 {
				d.Acknowledged, d.Result, d.AckAfter = true, answer.Result, time.Since(start)
				d.Answers = append(d.Answers, class+" "+answer.Result)
				return d
			}
			d.Answers = append(d.Answers, class)
			if res.StatusCode/100 == 4 && res.StatusCode != http.StatusConflict {
				d.Refused = true
				return d
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
	return d
}

// transportClass names an attempt that got no HTTP answer, as pspsim does.
func transportClass(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "err:timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "err:refused"
	default:
		return "err:broken"
	}
}

// readReceiver reads the receiver's stats into obs.
func readReceiver(ctx context.Context, client *http.Client, c config, obs *Observations) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.receiver+"/debug/stats", nil)
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/stats: %d", res.StatusCode)
	}
	var s struct {
		SignatureFailures int `json:"signature_failures"`
		Conflicts         int `json:"conflicts"`
		Events            map[string]struct {
			Source        string `json:"source"`
			TransactionID string `json:"transaction_id"`
			Type          string `json:"type"`
			OrderID       string `json:"order_id"`
			Deliveries    int    `json:"deliveries"`
		} `json:"events"`
	}
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		return err
	}
	obs.SignatureFailures, obs.Conflicts = s.SignatureFailures, s.Conflicts
	obs.Messages = obs.Messages[:0]
	for id, e := range s.Events {
		if e.Deliveries > 0 {
			obs.Messages = append(obs.Messages, Message{WebhookID: id, Type: e.Type, Source: e.Source,
				TransactionID: e.TransactionID, OrderID: e.OrderID})
		}
	}
	slices.SortFunc(obs.Messages, func(a, b Message) int { return strings.Compare(a.WebhookID, b.WebhookID) })
	return nil
}

// readPayments reads whether each PaymentIntent is recorded, as the admin
// API answers it (GET /admin/api/v1/payments/{source}/{transaction_id}):
// one row at most, the UNIQUE constraint says so.
func readPayments(ctx context.Context, client *http.Client, c config, obs *Observations) {
	obs.Rows = map[string]int{}
	for i, p := range obs.Pairs {
		req, err := c.adminRequest(http.MethodGet, c.admin[i%len(c.admin)]+"/admin/api/v1/payments/"+
			url.PathEscape(c.source)+"/"+url.PathEscape(p.PaymentIntent))
		if err != nil {
			continue
		}
		res, err := client.Do(req.WithContext(ctx))
		if err != nil {
			obs.Errors = append(obs.Errors, "reading payment "+p.PaymentIntent+": "+err.Error())
			continue
		}
		res.Body.Close()
		switch res.StatusCode {
		case http.StatusOK:
			obs.Rows[p.PaymentIntent] = 1
		case http.StatusNotFound:
		default:
			obs.Errors = append(obs.Errors, fmt.Sprintf("reading payment %s: %d", p.PaymentIntent, res.StatusCode))
		}
	}
}

// readOrders reads each order as the admin API answers it.
func readOrders(ctx context.Context, client *http.Client, c config, obs *Observations) {
	obs.Orders = map[string]OrderState{}
	for i, p := range obs.Pairs {
		req, err := c.adminRequest(http.MethodGet, c.admin[i%len(c.admin)]+"/admin/api/v1/orders/"+url.PathEscape(p.Order))
		if err != nil {
			continue
		}
		res, err := client.Do(req.WithContext(ctx))
		if err != nil {
			obs.Errors = append(obs.Errors, "reading order "+p.Order+": "+err.Error())
			continue
		}
		var o struct {
			Status   string `json:"status"`
			Payments []struct {
				TransactionID string `json:"transaction_id"`
			} `json:"payments"`
		}
		err = json.NewDecoder(res.Body).Decode(&o)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			obs.Errors = append(obs.Errors, fmt.Sprintf("reading order %s: %d %v", p.Order, res.StatusCode, err))
			continue
		}
		st := OrderState{Status: o.Status}
		for _, q := range o.Payments {
			st.Payments = append(st.Payments, q.TransactionID)
		}
		obs.Orders[p.Order] = st
	}
}
