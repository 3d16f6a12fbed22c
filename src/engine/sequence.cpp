#include "engine/sequence.h"

#include "engine/sample_state.h"

namespace tokamak {

Sequence::Sequence() = default;
Sequence::~Sequence() = default;
Sequence::Sequence(Sequence&&) noexcept = default;
Sequence& Sequence::operator=(Sequence&&) noexcept = default;

std::unique_ptr<Sequence> Sequence::fork(int32_t new_index) const {
  auto child = std::make_unique<Sequence>();
  child->request_id = request_id;
  child->index = new_index;
  child->priority = priority;
  child->arrival = arrival;
  child->tokens = tokens;
  child->n_prompt = n_prompt;
  child->n_computed = n_computed;
  child->n_evicted = n_evicted;
  child->cached_at_admission = cached_at_admission;  // it shares the parent's prompt blocks
  return child;
}

}  // namespace tokamak
