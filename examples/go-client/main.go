// Command a2a-go-client calls an a2a-grpc server (A2A 1.0, lf.a2a.v1.A2AService) from stubs generated
// from protos/a2a.proto, and prints one JSON object per line:
//
//	send            SendMessage with a2a-version and a2a-extensions: task id, state, the a2a-extensions trailer
//	get             GetTask of that task: id, state, the trailer
//	stream_headers  SendStreamingMessage: the a2a-extensions echo in the response headers
//	stream_event    one line per event: its kind (task, message, status_update, artifact_update) and state
//	stream_end      the stream's trailer
//	error           two calls that fail: GetTask of an unknown id (NOT_FOUND, TASK_NOT_FOUND) and a call
//	                without the extension (FAILED_PRECONDITION, EXTENSION_SUPPORT_REQUIRED when the card
//	                declares it required): the status code and the google.rpc.ErrorInfo detail
//
// Usage: a2a-go-client [-timeout 10s] HOST:PORT EXTENSION_URI
//
// See README.md in this folder for how to generate the stubs and build it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	a2a "google.golang.org/lf/a2a/v1"
)

const extensionsKey = "a2a-extensions"

// emit prints one JSON object on its own line.
func emit(fields map[string]interface{}) {
	line, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(line))
}

// fatal prints a {"step": "fatal"} line and exits 1.
func fatal(step string, err error) {
	emit(map[string]interface{}{"step": "fatal", "during": step, "error": err.Error()})
	os.Exit(1)
}

// extensions reads every a2a-extensions entry of md, split on commas, trimmed, empties dropped.
func extensions(md metadata.MD) []string {
	uris := []string{}
	for _, value := range md.Get(extensionsKey) {
		for _, uri := range strings.Split(value, ",") {
			if uri = strings.TrimSpace(uri); uri != "" {
				uris = append(uris, uri)
			}
		}
	}
	return uris
}

// withParams returns ctx carrying the A2A service parameters: a2a-version 1.0 and, if given, a2a-extensions.
func withParams(ctx context.Context, extension string) context.Context {
	ctx = metadata.AppendToOutgoingContext(ctx, "a2a-version", "1.0")
	if extension != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, extensionsKey, extension)
	}
	return ctx
}

func userMessage(text string) *a2a.Message {
	return &a2a.Message{
		MessageId: fmt.Sprintf("go-%d", time.Now().UnixNano()),
		Role:      a2a.Role_ROLE_USER,
		Parts:     []*a2a.Part{{Content: &a2a.Part_Text{Text: text}}},
	}
}

// eventKind names the payload of a stream event as the proto's oneof does.
func eventKind(event *a2a.StreamResponse) (string, string) {
	switch payload := event.Payload.(type) {
	case *a2a.StreamResponse_Task:
		return "task", payload.Task.GetStatus().GetState().String()
	case *a2a.StreamResponse_Message:
		return "message", ""
	case *a2a.StreamResponse_StatusUpdate:
		return "status_update", payload.StatusUpdate.GetStatus().GetState().String()
	case *a2a.StreamResponse_ArtifactUpdate:
		return "artifact_update", ""
	}
	return "unknown", ""
}

// artifactText joins the text parts of an artifact.
func artifactText(artifact *a2a.Artifact) string {
	texts := []string{}
	for _, part := range artifact.GetParts() {
		if text, ok := part.Content.(*a2a.Part_Text); ok {
			texts = append(texts, text.Text)
		}
	}
	return strings.Join(texts, "")
}

// reportError prints the status code of err and its google.rpc.ErrorInfo detail (grpc-status-details-bin).
func reportError(call string, err error) {
	st, ok := status.FromError(err)
	if !ok {
		fatal(call, fmt.Errorf("not a gRPC status: %w", err))
	}
	line := map[string]interface{}{"step": "error", "call": call, "code": st.Code().String(),
		"code_number": int(st.Code()), "message": st.Message()}
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			line["reason"] = d.GetReason()
			line["domain"] = d.GetDomain()
			line["metadata"] = d.GetMetadata()
		case *errdetails.BadRequest:
			violations := []string{}
			for _, v := range d.GetFieldViolations() {
				violations = append(violations, v.GetField()+": "+v.GetDescription())
			}
			line["field_violations"] = violations
		case error:
			line["detail_error"] = d.Error()
		}
	}
	emit(line)
}

func main() {
	timeout := flag.Duration("timeout", 10*time.Second, "deadline of each call")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: a2a-go-client [-timeout 10s] HOST:PORT EXTENSION_URI")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	target, extension := flag.Arg(0), flag.Arg(1)

	dialCtx, cancelDial := context.WithTimeout(context.Background(), *timeout)
	defer cancelDial()
	conn, err := grpc.DialContext(dialCtx, target, grpc.WithInsecure(), grpc.WithBlock())
	if err != nil {
		fatal("dial", err)
	}
	defer conn.Close()
	client := a2a.NewA2AServiceClient(conn)
	call := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), *timeout)
	}

	// SendMessage: blocks until the task is terminal; the echo comes back in the trailers.
	ctx, cancel := call()
	var trailer metadata.MD
	sent, err := client.SendMessage(withParams(ctx, extension),
		&a2a.SendMessageRequest{Message: userMessage("hello from Go")}, grpc.Trailer(&trailer))
	cancel()
	if err != nil {
		fatal("SendMessage", err)
	}
	task := sent.GetTask()
	if task == nil {
		fatal("SendMessage", errors.New("the answer is not a Task"))
	}
	emit(map[string]interface{}{"step": "send", "task_id": task.GetId(), "context_id": task.GetContextId(),
		"state": task.GetStatus().GetState().String(), "trailer_extensions": extensions(trailer)})

	// GetTask of it.
	ctx, cancel = call()
	trailer = nil
	got, err := client.GetTask(withParams(ctx, extension), &a2a.GetTaskRequest{Id: task.GetId()}, grpc.Trailer(&trailer))
	cancel()
	if err != nil {
		fatal("GetTask", err)
	}
	texts := []string{}
	for _, artifact := range got.GetArtifacts() {
		texts = append(texts, artifactText(artifact))
	}
	emit(map[string]interface{}{"step": "get", "task_id": got.GetId(), "state": got.GetStatus().GetState().String(),
		"artifacts": texts, "trailer_extensions": extensions(trailer)})

	// SendStreamingMessage: the echo comes in the response headers, before the first event, and in the trailers.
	ctx, cancel = call()
	stream, err := client.SendStreamingMessage(withParams(ctx, extension),
		&a2a.SendMessageRequest{Message: userMessage("stream from Go")})
	if err != nil {
		fatal("SendStreamingMessage", err)
	}
	header, err := stream.Header()
	if err != nil {
		fatal("SendStreamingMessage headers", err)
	}
	emit(map[string]interface{}{"step": "stream_headers", "header_extensions": extensions(header)})
	for {
		event, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			fatal("SendStreamingMessage", err)
		}
		kind, state := eventKind(event)
		line := map[string]interface{}{"step": "stream_event", "kind": kind}
		if state != "" {
			line["state"] = state
		}
		if update := event.GetArtifactUpdate(); update != nil {
			line["text"] = artifactText(update.GetArtifact())
		}
		emit(line)
	}
	emit(map[string]interface{}{"step": "stream_end", "trailer_extensions": extensions(stream.Trailer())})
	cancel()

	// Two calls that fail: an unknown task, and a call that does not request the extension.
	ctx, cancel = call()
	_, err = client.GetTask(withParams(ctx, extension), &a2a.GetTaskRequest{Id: "no-such-task"})
	cancel()
	if err == nil {
		fatal("GetTask unknown", errors.New("GetTask of an unknown id succeeded"))
	}
	reportError("GetTask unknown", err)

	ctx, cancel = call()
	_, err = client.GetTask(withParams(ctx, ""), &a2a.GetTaskRequest{Id: task.GetId()})
	cancel()
	if err == nil {
		emit(map[string]interface{}{"step": "ok", "call": "GetTask without extension"})
	} else {
		reportError("GetTask without extension", err)
	}
}
