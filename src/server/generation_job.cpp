#include "server/generation_job.h"

#include "server/api_error.h"
#include "server/metrics.h"

namespace tokamak::server {

GenerationJob::GenerationJob(GenerationRequest request, ResponseIdentity identity,
                             std::shared_ptr<ResponseWriter> writer, Context context,
                             std::function<void()> on_done)
    : request_(std::move(request)),
      writer_(std::move(writer)),
      ctx_(context),
      on_done_(std::move(on_done)),
      builder_(request_, *context.tokenizer, std::move(identity)) {}

void GenerationJob::start() {
  prompts_.reserve(request_.prompts.size());
  try {
    for (const PromptInput& p : request_.prompts) {
      Request r;
      r.prompt = p.tokens;
      r.params = request_.params;
      r.n = request_.n;
      PromptState state;
      state.stream = ctx_.engine->submit(std::move(r));
      prompts_.push_back(std::move(state));
    }
  } catch (const RejectedRequest& e) {
    // Whatever was queued goes: the client gets one error for the whole request.
    for (const PromptState& p : prompts_) ctx_.engine->cancel(p.stream->id());
    prompts_.clear();
    answered_ = true;
    if (e.kind() == RejectedRequest::Kind::QueueFull) {
      throw ApiError(429, e.what(), {}, "queue_full", {{"Retry-After", "1"}});
    }
    throw ApiError(400, e.what(), "prompt",
                   e.kind() == RejectedRequest::Kind::TooLong ? "context_length_exceeded" : "");
  }
  if (streaming()) {
    writer_->begin_stream(200, "text/event-stream",
                          {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
    writer_->write(builder_.stream_start());
  }
  const std::weak_ptr<PumpedJob> self = weak_from_this();
  OutputPump* pump = ctx_.pump;
  for (const PromptState& p : prompts_)
    p.stream->set_on_output([pump, self] { pump->notify(self); });
  writer_->on_disconnect([self] {
    if (auto job = self.lock()) static_cast<GenerationJob*>(job.get())->cancel();
  });
  // Outputs that arrived before the callbacks were set.
  pump->notify(self);
}

void GenerationJob::cancel() {
  if (cancelled_.exchange(true)) return;
  for (const PromptState& p : prompts_) ctx_.engine->cancel(p.stream->id());
}

void GenerationJob::abort(const std::string& message) {
  {
    std::lock_guard lock(mu_);
    abort_message_ = message;
  }
  cancel();
  ctx_.pump->notify(weak_from_this());
}

bool GenerationJob::answer_abort() {
  std::string message;
  {
    std::lock_guard lock(mu_);
    message.swap(abort_message_);
  }
  if (message.empty() || answered_) return false;
  answered_ = true;
  if (streaming()) {
    writer_->write(ResponseBuilder::stream_error(message, "server_shutdown"));
    writer_->write(ResponseBuilder::stream_done());
    writer_->end();
  } else {
    writer_->send(error_response(ApiError(503, message, {}, "server_shutdown")));
  }
  return true;
}

void GenerationJob::drain() {
  answer_abort();
  const int32_t total = static_cast<int32_t>(prompts_.size()) * request_.n;
  if (finished_ == total) return;
  for (size_t i = 0; i < prompts_.size(); ++i) {
    while (auto output = prompts_[i].stream->try_next()) handle(i, *output);
  }
  if (finished_ == total) complete();
}

void GenerationJob::handle(size_t prompt, const RequestOutput& output) {
  PromptState& p = prompts_[prompt];
  const int32_t choice = static_cast<int32_t>(prompt) * request_.n + output.index;
  p.generated += static_cast<int32_t>(output.token_ids.size());
  if (output.finish) {
    ++finished_;
    ++p.finished;
    if (*output.finish == FinishReason::Error && error_.empty()) error_ = output.error;
    if (output.metrics) {
      ctx_.metrics->observe_sample(*output.metrics, *output.finish);
      // A sample that produced a token had its prompt computed by then.
      if (output.metrics->output_tokens > 0 &&
          (!p.prefilled || output.metrics->first_token < *p.prefilled)) {
        p.prefilled = output.metrics->first_token;
      }
    }
    if (p.finished == request_.n) {
      ctx_.metrics->observe_request(static_cast<int32_t>(request_.prompts[prompt].tokens.size()),
                                    p.generated, p.prefilled);
    }
  }
  if (answered_) return;
  if (streaming()) {
    if (output.finish == FinishReason::Error) return;  // reported once, in complete()
    std::string event = builder_.stream_event(output, choice);
    if (!event.empty() && !writer_->write(std::move(event))) cancel();
  } else {
    builder_.add(output, choice);
  }
}

void GenerationJob::complete() {
  // An abort that came while this drain ran: its cancellation is why the samples ended.
  answer_abort();
  if (!answered_ && !writer_->client_gone()) {
    answered_ = true;
    if (streaming()) {
      if (!error_.empty()) {
        writer_->write(ResponseBuilder::stream_error(error_, "generation_failed"));
      } else if (request_.include_usage) {
        writer_->write(builder_.stream_usage());
      }
      writer_->write(ResponseBuilder::stream_done());
      writer_->end();
    } else if (!error_.empty()) {
      ctx_.metrics->count_error(500);
      writer_->send(error_response(ApiError(500, error_, {}, "generation_failed")));
    } else {
      writer_->send({.status = 200,
                     .content_type = "application/json",
                     .headers = {},
                     .body = builder_.body()});
    }
  }
  answered_ = true;
  if (on_done_) std::exchange(on_done_, nullptr)();
}

}  // namespace tokamak::server
