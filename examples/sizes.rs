fn main() {
    use std::mem::size_of;
    println!("Connection {}", size_of::<_core::flow::Connection>());
    println!("Flow {}", size_of::<_core::flow::state::Flow>());
    println!("DirectionState {}", size_of::<_core::flow::state::DirectionState>());
    println!("Milestones {}", size_of::<_core::flow::connection::Milestones>());
    println!("FlowKey {}", size_of::<_core::flow::FlowKey>());
    println!("Event {}", size_of::<_core::flow::Event>());
    println!("Segment {}", size_of::<_core::decode::Segment>());
    println!("SeenSegment {}", size_of::<_core::flow::connection::SeenSegment>());
}
