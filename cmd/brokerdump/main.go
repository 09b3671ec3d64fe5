// Command brokerdump reads back what paylock's broker sinks wrote, for the
// chaos scenarios and by hand: every message of a NATS JetStream stream or
// every record of a Kafka topic, one tab-separated line each (webhook-id,
// Nats-Msg-Id, key, partition, signed), or with --count only how many
// there are, or with --order whether each payment's messages are held in
// version order (brokerdump.CheckOrder, as JSON). See package
// internal/brokerdump.
//
//	brokerdump nats --url nats://127.0.0.1:4222 --stream PAYMENTS
//	brokerdump kafka --brokers 127.0.0.1:9092 --topic payments --count
//	brokerdump kafka --brokers 127.0.0.1:9093 --topic payments --tls-ca /tmp/kafka-tls/ca.pem
//
// A NATS server's credentials go in --url (nats://user:password@host:port).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paylock/paylock/internal/brokerdump"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "brokerdump:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "nats" && args[0] != "kafka" {
		return fmt.Errorf("usage: brokerdump nats|kafka [flags] (brokerdump nats -h)")
	}
	fs := flag.NewFlagSet("brokerdump "+args[0], flag.ContinueOnError)
	url := fs.String("url", "nats://127.0.0.1:4222", "nats: the server")
	stream := fs.String("stream", "", "nats: the stream")
	brokers := fs.String("brokers", "127.0.0.1:9092", "kafka: comma-separated seed brokers")
	topic := fs.String("topic", "", "kafka: the topic")
	tlsCA := fs.String("tls-ca", "", "kafka: speak TLS, trusting the CAs of this PEM file")
	count := fs.Bool("count", false, "print only how many messages there are")
	order := fs.Bool("order", false, "print only whether each payment's messages are in version order (JSON)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var msgs []brokerdump.Message
	var err error
	if args[0] == "nats" {
		msgs, err = brokerdump.NATS(ctx, *url, *stream)
	} else {
		var opts []kgo.Opt
		if *tlsCA != "" {
			tc, terr := caConfig(*tlsCA)
			if terr != nil {
				return terr
			}
			opts = append(opts, kgo.DialTLSConfig(tc))
		}
		msgs, err = brokerdump.Kafka(ctx, strings.Split(*brokers, ","), *topic, opts...)
	}
	if err != nil {
		return err
	}
	if *order {
		return json.NewEncoder(stdout).Encode(brokerdump.CheckOrder(msgs))
	}
	if *count {
		_, err = fmt.Fprintln(stdout, len(msgs))
		return err
	}
	for _, m := range msgs {
		if _, err := fmt.Fprintf(stdout, "%s\t%s\t%s\t%d\t%t\n", m.ID, m.MsgID, m.Key, m.Partition, m.Signed); err != nil {
			return err
		}
	}
	return nil
}

// caConfig is a TLS configuration trusting the certificates of file.
func caConfig(file string) (*tls.Config, error) {
	pemCA, err := os.ReadFile(file) // #nosec G304: the operator's file
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemCA) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate", file)
	}
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}
