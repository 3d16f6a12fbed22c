#include "engine/sequence.h"

#include "engine/sample_state.h"

namespace tokamak {

Sequence::Sequence() = default;
Sequence::~Sequence() = default;
Sequence::Sequence(Sequence&&) noexcept = default;
Sequence& Sequence::operator=(Sequence&&) noexcept = default;

}  // namespace tokamak
